//! Release-time scheduler: holds items until their release time and hands them out in
//! (release time, arrival sequence) order. Pure: the caller passes the clock in.
//!
//! Two structures share the work: items whose release time is not earlier than the last one
//! queued go to a FIFO (O(1); with a constant delay that is every item), the others to a
//! binary min-heap. `pop_due` takes the smaller head of the two. The sequence number breaks
//! ties, so items with equal release times leave in arrival order (stable).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug)]
struct Entry<T> {
    at: u64,
    seq: u64,
    item: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Entry<T> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

/// Min-queue of items keyed by release time (ns, caller's clock), stable on ties.
#[derive(Debug)]
pub struct Scheduler<T> {
    fifo: VecDeque<Entry<T>>,
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
}

impl<T> Default for Scheduler<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Scheduler<T> {
    pub fn new() -> Self {
        Scheduler {
            fifo: VecDeque::with_capacity(4096),
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hold `item` until `at`.
    #[inline]
    pub fn push(&mut self, at: u64, item: T) {
        let e = Entry {
            at,
            seq: self.seq,
            item,
        };
        self.seq += 1;
        match self.fifo.back() {
            Some(b) if at < b.at => self.heap.push(e),
            _ => self.fifo.push_back(e),
        }
    }

    /// Release time of the earliest item.
    #[inline]
    pub fn next_at(&self) -> Option<u64> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => Some(f.at.min(h.at)),
            (Some(f), None) => Some(f.at),
            (None, Some(h)) => Some(h.at),
            (None, None) => None,
        }
    }

    /// Take the earliest item if its release time is at or before `now`.
    #[inline]
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, T)> {
        let from_fifo = match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => f.key() < h.key(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if from_fifo {
            if self.fifo.front()?.at <= now {
                return self.fifo.pop_front().map(|e| (e.at, e.item));
            }
        } else if self.heap.peek()?.at <= now {
            return self.heap.pop().map(|e| (e.at, e.item));
        }
        None
    }

    /// Take every item regardless of time, in release order (used at shutdown).
    pub fn drain_all(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while let Some((_, item)) = self.pop_due(u64::MAX) {
            out.push(item);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_for_constant_delay() {
        let mut s = Scheduler::new();
        for i in 0..100u64 {
            s.push(i * 10 + 1000, i);
        }
        assert_eq!(s.pop_due(999), None);
        let out: Vec<u64> = std::iter::from_fn(|| s.pop_due(u64::MAX).map(|x| x.1)).collect();
        assert_eq!(out, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn stable_on_equal_times() {
        let mut s = Scheduler::new();
        s.push(50, "a");
        s.push(10, "b");
        s.push(50, "c");
        s.push(10, "d");
        s.push(50, "e");
        let out: Vec<&str> = std::iter::from_fn(|| s.pop_due(100).map(|x| x.1)).collect();
        assert_eq!(out, vec!["b", "d", "a", "c", "e"]);
    }

    #[test]
    fn only_due_items_released() {
        let mut s = Scheduler::new();
        s.push(30, 3);
        s.push(10, 1);
        s.push(20, 2);
        assert_eq!(s.next_at(), Some(10));
        assert_eq!(s.pop_due(15), Some((10, 1)));
        assert_eq!(s.pop_due(15), None);
        assert_eq!(s.len(), 2);
        assert_eq!(s.drain_all(), vec![2, 3]);
        assert!(s.is_empty());
    }
}
