//! Loss counts from linkem's own decisions, shared with the Python harness as a fixture
//! (tests/fixtures/linkem_loss_counts.json): harness/link/losscheck.py is tested on them, so
//! its expected rates and dispersions are checked against what linkem really does.
//!
//! The test fails when the fixture no longer matches linkem (a model or the random stream
//! changed); regenerate it with `LINKEM_UPDATE_FIXTURES=1 cargo test --test loss_counts`.

use linkem::config::Config;
use linkem::impair::{Decision, Impairment};
use serde_json::{json, Value};
use std::path::PathBuf;

const PACKETS: u64 = 20_000;
const SEEDS: std::ops::RangeInclusive<u64> = 1..=10;
/// One of each model (and netem's tc defaults), parameters as in linkem's config.
const MODELS: &[&str] = &[
    r#"{"model":"random","p":0.01}"#,
    r#"{"model":"random","p":0.05,"correlation":0.25}"#,
    r#"{"model":"gemodel","p":0.01,"r":0.3,"one_minus_h":0.8,"one_minus_k":0.002}"#,
    r#"{"model":"gemodel","p":0.005,"r":0.5}"#,
    r#"{"model":"state","p13":0.02,"p31":0.3,"p32":0.2,"p23":0.1,"p14":0.01}"#,
    r#"{"model":"state","p13":0.03}"#,
];

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/linkem_loss_counts.json")
}

fn counts() -> Value {
    let mut rows = Vec::new();
    for model in MODELS {
        let text = format!(r#"{{"directions":[{{"name":"forward","queue":10,"loss":{model}}}]}}"#);
        let cfg = Config::from_json(&text).unwrap();
        for seed in SEEDS {
            let mut imp = Impairment::new(&cfg.directions[0], seed);
            let dropped = (0..PACKETS)
                .filter(|_| imp.decide() == Decision::Drop)
                .count() as u64;
            rows.push(json!({
                "loss": serde_json::from_str::<Value>(model).unwrap(),
                "direction": "forward",
                "seed": seed,
                "passed": PACKETS - dropped,
                "dropped": dropped,
            }));
        }
    }
    json!({
        "about": "linkem loss decisions (tests/loss_counts.rs): packets passed and dropped \
                  by one direction per model and seed, from the model's initial state",
        "rows": rows,
    })
}

#[test]
fn loss_counts_fixture_matches_linkem() {
    let now = counts();
    let path = fixture_path();
    if std::env::var_os("LINKEM_UPDATE_FIXTURES").is_some() {
        let text = serde_json::to_string_pretty(&now).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
    }
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap();
    assert!(
        stored == now,
        "{} is stale: linkem's loss decisions changed; regenerate it with \
         LINKEM_UPDATE_FIXTURES=1 cargo test --test loss_counts and rerun the Python tests",
        path.display()
    );
}
