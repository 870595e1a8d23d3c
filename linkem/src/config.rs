//! The configuration file (JSON), a fixed contract with the Python harness.
//!
//! Unknown keys are rejected everywhere; every key except a direction's `name` and `queue` may
//! be omitted. Probabilities are fractions 0..=1, never percent. Loss-model parameters that
//! are omitted take netem's (tc's) defaults, so `{"model":"gemodel","p":0.01}` means the same
//! as `tc qdisc ... netem loss gemodel 1%`.

use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// A configuration error; the message names the offending key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "default_stats_path")]
    pub stats_path: String,
    #[serde(default = "default_stats_interval")]
    pub stats_interval_ms: u64,
    /// A Unix socket for runtime control (control.rs); none: no control channel.
    #[serde(default)]
    pub control_path: Option<String>,
    #[serde(default)]
    pub directions: Vec<DirectionConfig>,
}

fn default_stats_path() -> String {
    "linkem-stats.json".to_string()
}
fn default_stats_interval() -> u64 {
    200
}
fn default_queue_max_len() -> u32 {
    200_000
}

/// Jitter distribution, as netem's `distribution` tables.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum JitterDistribution {
    #[default]
    Uniform,
    Normal,
    Pareto,
    Paretonormal,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DirectionConfig {
    pub name: String,
    pub queue: u16,
    #[serde(default)]
    pub delay_us: u64,
    #[serde(default)]
    pub jitter_us: u64,
    #[serde(default)]
    pub jitter_distribution: JitterDistribution,
    #[serde(default)]
    pub delay_correlation: f64,
    #[serde(default)]
    pub loss: LossConfig,
    #[serde(default)]
    pub duplicate: f64,
    #[serde(default)]
    pub duplicate_correlation: f64,
    #[serde(default)]
    pub reorder: f64,
    #[serde(default)]
    pub reorder_correlation: f64,
    #[serde(default)]
    pub reorder_gap: u32,
    #[serde(default = "default_queue_max_len")]
    pub queue_max_len: u32,
    /// Read each packet's headers (IP length, TCP): bytes are counted, and faults that need
    /// them (a rate limit, resets, `after_bytes`) can be set at run time.
    #[serde(default)]
    pub inspect: bool,
}

/// Loss model. Parameter meanings are netem's (see loss.rs).
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(tag = "model", rename_all = "lowercase", deny_unknown_fields)]
pub enum LossConfig {
    #[default]
    None,
    Random {
        #[serde(default)]
        p: f64,
        #[serde(default)]
        correlation: f64,
    },
    /// netem `loss gemodel p r 1-h 1-k`; tc defaults r = 1, 1-h = 1, 1-k = 0.
    Gemodel {
        #[serde(default)]
        p: f64,
        #[serde(default = "one")]
        r: f64,
        #[serde(default = "one")]
        one_minus_h: f64,
        #[serde(default)]
        one_minus_k: f64,
    },
    /// netem `loss state p13 p31 p32 p23 p14`; tc defaults p31 = 1 - p13, p32 = 0, p23 = 1,
    /// p14 = 0.
    State {
        #[serde(default)]
        p13: f64,
        #[serde(default)]
        p31: Option<f64>,
        #[serde(default)]
        p32: f64,
        #[serde(default = "one")]
        p23: f64,
        #[serde(default)]
        p14: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl Config {
    /// Parse and validate a configuration from JSON text.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                ConfigError(format!("config: {inner}"))
            } else {
                ConfigError(format!("config key `{path}`: {inner}"))
            }
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read, parse and validate a configuration file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Config::from_json(&text)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.stats_interval_ms == 0 {
            return Err(ConfigError(
                "config key `stats_interval_ms`: must be > 0".into(),
            ));
        }
        if self.stats_path.is_empty() {
            return Err(ConfigError(
                "config key `stats_path`: must not be empty".into(),
            ));
        }
        if self.control_path.as_deref() == Some("") {
            return Err(ConfigError(
                "config key `control_path`: must not be empty (leave it out for no control)".into(),
            ));
        }
        if self.directions.is_empty() {
            return Err(ConfigError(
                "config key `directions`: at least one direction is required".into(),
            ));
        }
        for (i, d) in self.directions.iter().enumerate() {
            let at = |key: &str| format!("directions[{i}].{key}");
            if d.name.is_empty() {
                return Err(ConfigError(format!(
                    "config key `{}`: must not be empty",
                    at("name")
                )));
            }
            for (j, o) in self.directions.iter().enumerate().take(i) {
                if o.name == d.name {
                    return Err(ConfigError(format!(
                        "config key `{}`: name {:?} already used by directions[{j}]",
                        at("name"),
                        d.name
                    )));
                }
                if o.queue == d.queue {
                    return Err(ConfigError(format!(
                        "config key `{}`: queue {} already used by directions[{j}]",
                        at("queue"),
                        d.queue
                    )));
                }
            }
            if d.queue_max_len == 0 {
                return Err(ConfigError(format!(
                    "config key `{}`: must be > 0",
                    at("queue_max_len")
                )));
            }
            // netem keeps jitter as a signed 32-bit count of nanoseconds.
            if d.jitter_us > i32::MAX as u64 / 1000 {
                return Err(ConfigError(format!(
                    "config key `{}`: at most {} µs",
                    at("jitter_us"),
                    i32::MAX as u64 / 1000
                )));
            }
            if d.delay_us > 3_600_000_000 {
                return Err(ConfigError(format!(
                    "config key `{}`: at most one hour",
                    at("delay_us")
                )));
            }
            let mut probs: Vec<(String, f64)> = vec![
                (at("delay_correlation"), d.delay_correlation),
                (at("duplicate"), d.duplicate),
                (at("duplicate_correlation"), d.duplicate_correlation),
                (at("reorder"), d.reorder),
                (at("reorder_correlation"), d.reorder_correlation),
            ];
            match &d.loss {
                LossConfig::None => {}
                LossConfig::Random { p, correlation } => {
                    probs.push((at("loss.p"), *p));
                    probs.push((at("loss.correlation"), *correlation));
                }
                LossConfig::Gemodel {
                    p,
                    r,
                    one_minus_h,
                    one_minus_k,
                } => {
                    probs.push((at("loss.p"), *p));
                    probs.push((at("loss.r"), *r));
                    probs.push((at("loss.one_minus_h"), *one_minus_h));
                    probs.push((at("loss.one_minus_k"), *one_minus_k));
                }
                LossConfig::State {
                    p13,
                    p31,
                    p32,
                    p23,
                    p14,
                } => {
                    probs.push((at("loss.p13"), *p13));
                    if let Some(p31) = p31 {
                        probs.push((at("loss.p31"), *p31));
                    }
                    probs.push((at("loss.p32"), *p32));
                    probs.push((at("loss.p23"), *p23));
                    probs.push((at("loss.p14"), *p14));
                }
            }
            for (key, v) in probs {
                if !(0.0..=1.0).contains(&v) {
                    return Err(ConfigError(format!(
                        "config key `{key}`: {v} is not a fraction in 0..1 (probabilities are fractions, not percent)"
                    )));
                }
            }
            if let LossConfig::State {
                p13, p31, p32, p14, ..
            } = &d.loss
            {
                let p31 = p31.unwrap_or(1.0 - p13);
                if p13 + p14 > 1.0 + 1e-12 {
                    return Err(ConfigError(format!(
                        "config key `{}`: p13 + p14 must be at most 1",
                        at("loss")
                    )));
                }
                if p31 + p32 > 1.0 + 1e-12 {
                    return Err(ConfigError(format!(
                        "config key `{}`: p31 + p32 must be at most 1",
                        at("loss")
                    )));
                }
            }
        }
        Ok(())
    }
}

impl DirectionConfig {
    /// Whether this direction needs packet payloads (only to re-inject duplicates).
    pub fn needs_payload(&self) -> bool {
        self.duplicate > 0.0
    }

    /// How many bytes of each packet the kernel copies to linkem: the whole packet to
    /// duplicate it, its headers to inspect them, else none (metadata only: the fastest).
    pub fn copy_range(&self) -> u32 {
        if self.needs_payload() {
            0xffff
        } else if self.inspect {
            crate::tcp::HEADER_COPY
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_direction_defaults() {
        let c = Config::from_json(r#"{"directions":[{"name":"f","queue":10}]}"#).unwrap();
        assert_eq!(c.seed, 0);
        assert_eq!(c.stats_interval_ms, 200);
        let d = &c.directions[0];
        assert_eq!(d.delay_us, 0);
        assert_eq!(d.queue_max_len, 200_000);
        assert_eq!(d.loss, LossConfig::None);
        assert_eq!(d.jitter_distribution, JitterDistribution::Uniform);
    }

    #[test]
    fn netem_defaults_for_loss_models() {
        let c = Config::from_json(
            r#"{"directions":[{"name":"f","queue":1,"loss":{"model":"gemodel","p":0.01}},
                              {"name":"r","queue":2,"loss":{"model":"state","p13":0.1}}]}"#,
        )
        .unwrap();
        assert_eq!(
            c.directions[0].loss,
            LossConfig::Gemodel {
                p: 0.01,
                r: 1.0,
                one_minus_h: 1.0,
                one_minus_k: 0.0
            }
        );
        assert_eq!(
            c.directions[1].loss,
            LossConfig::State {
                p13: 0.1,
                p31: None,
                p32: 0.0,
                p23: 1.0,
                p14: 0.0
            }
        );
    }

    #[test]
    fn unknown_top_level_key_rejected() {
        let e =
            Config::from_json(r#"{"sed":1,"directions":[{"name":"f","queue":1}]}"#).unwrap_err();
        assert!(e.0.contains("sed"), "{e}");
    }

    #[test]
    fn unknown_direction_key_rejected_with_path() {
        let e = Config::from_json(r#"{"directions":[{"name":"f","queue":1,"delay_ms":5}]}"#)
            .unwrap_err();
        assert!(
            e.0.contains("delay_ms") && e.0.contains("directions[0]"),
            "{e}"
        );
    }

    #[test]
    fn unknown_loss_key_and_model_rejected() {
        let e = Config::from_json(
            r#"{"directions":[{"name":"f","queue":1,"loss":{"model":"random","p":0.1,"q":1}}]}"#,
        )
        .unwrap_err();
        assert!(e.0.contains('q'), "{e}");
        let e = Config::from_json(
            r#"{"directions":[{"name":"f","queue":1,"loss":{"model":"bursty"}}]}"#,
        )
        .unwrap_err();
        assert!(e.0.contains("bursty"), "{e}");
    }

    #[test]
    fn missing_queue_rejected() {
        let e = Config::from_json(r#"{"directions":[{"name":"f"}]}"#).unwrap_err();
        assert!(e.0.contains("queue"), "{e}");
    }

    #[test]
    fn percent_instead_of_fraction_rejected() {
        let e = Config::from_json(
            r#"{"directions":[{"name":"f","queue":1,"loss":{"model":"random","p":10}}]}"#,
        )
        .unwrap_err();
        assert!(e.0.contains("directions[0].loss.p"), "{e}");
    }

    #[test]
    fn duplicate_queue_rejected() {
        let e =
            Config::from_json(r#"{"directions":[{"name":"f","queue":1},{"name":"r","queue":1}]}"#)
                .unwrap_err();
        assert!(e.0.contains("directions[1].queue"), "{e}");
    }

    #[test]
    fn inspect_copies_headers_and_duplicates_whole_packets() {
        let c = Config::from_json(
            r#"{"control_path":"/run/x.sock","directions":[{"name":"f","queue":1,"inspect":true},
                {"name":"r","queue":2},{"name":"d","queue":3,"inspect":true,"duplicate":0.1}]}"#,
        )
        .unwrap();
        assert_eq!(c.control_path.as_deref(), Some("/run/x.sock"));
        let ranges: Vec<u32> = c.directions.iter().map(|d| d.copy_range()).collect();
        assert_eq!(ranges, vec![crate::tcp::HEADER_COPY, 0, 0xffff]);
    }

    #[test]
    fn empty_control_path_rejected() {
        let e = Config::from_json(r#"{"control_path":"","directions":[{"name":"f","queue":1}]}"#)
            .unwrap_err();
        assert!(e.0.contains("control_path"), "{e}");
    }

    #[test]
    fn full_example_parses() {
        let text = r#"{
          "seed": 42,
          "stats_path": "/tmp/x/linkem-stats.json",
          "stats_interval_ms": 200,
          "directions": [
            {"name": "forward", "queue": 10,
             "delay_us": 150000, "jitter_us": 0, "jitter_distribution": "uniform", "delay_correlation": 0.0,
             "loss": {"model": "none"},
             "duplicate": 0.0, "duplicate_correlation": 0.0,
             "reorder": 0.0, "reorder_correlation": 0.0, "reorder_gap": 0,
             "queue_max_len": 200000}
          ]
        }"#;
        let c = Config::from_json(text).unwrap();
        assert_eq!(c.seed, 42);
        assert_eq!(c.directions[0].delay_us, 150_000);
    }
}
