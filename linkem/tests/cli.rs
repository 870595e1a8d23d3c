//! The binary's behaviour on bad input (no root needed: it exits before binding a queue).

use std::process::Command;

fn run_with_config(text: &str) -> (i32, String) {
    let dir =
        std::env::temp_dir().join(format!("linkem-cli-{}-{}", std::process::id(), text.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("c.json");
    std::fs::write(&cfg, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linkem"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_key_exits_2_naming_the_key() {
    let (code, err) = run_with_config(
        r#"{"directions":[{"name":"f","queue":10,"loss":{"model":"random","p":0.1,"corr":0.5}}]}"#,
    );
    assert_eq!(code, 2);
    assert!(err.contains("corr"), "{err}");
}

#[test]
fn out_of_range_probability_exits_2() {
    let (code, err) = run_with_config(r#"{"directions":[{"name":"f","queue":10,"duplicate":5}]}"#);
    assert_eq!(code, 2);
    assert!(err.contains("directions[0].duplicate"), "{err}");
}

#[test]
fn bad_command_line_and_missing_file_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_linkem")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_linkem"))
        .args(["--config", "/nonexistent/linkem.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
