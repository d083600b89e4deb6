//! `KwokConfig` files.

use std::time::Duration;

use quartermaster_pricing::CapacityType;
use quartermaster_sim::LatencyTable;

use crate::{KwokConfig, KwokError};

#[test]
fn an_empty_file_is_the_default() {
    for text in ["", "{}", "# nothing\n"] {
        assert_eq!(
            KwokConfig::parse("kwok.yaml", text).unwrap(),
            KwokConfig::default()
        );
    }
    let d = KwokConfig::default();
    assert_eq!(d.launch_latency.for_family("p5"), Duration::ZERO);
    assert_eq!(
        d.device_plugin_delay.for_family("g5"),
        Duration::from_secs(5)
    );
    assert!(d.capacity.is_empty() && d.insufficient_capacity.is_empty());
}

#[test]
fn reads_the_simulated_clouds_field_names_in_yaml_and_json() {
    let yaml = KwokConfig::parse(
        "kwok.yaml",
        r#"
launchLatency: { default: 10s, families: { p5: 1m } }
devicePluginDelay: 30s
capacity:
  - { family: p5, capacityType: spot, max: 2 }
insufficientCapacity:
  - { instanceType: p5.48xlarge, zone: us-east-1a, from: 0s, until: 30m }
"#,
    )
    .unwrap();
    assert_eq!(
        yaml.launch_latency,
        LatencyTable::uniform(Duration::from_secs(10)).with_family("p5", Duration::from_secs(60))
    );
    assert_eq!(
        yaml.device_plugin_delay,
        LatencyTable::uniform(Duration::from_secs(30))
    );
    assert_eq!(yaml.capacity[0].capacity_type, Some(CapacityType::Spot));
    assert_eq!(yaml.capacity[0].max, 2);
    assert_eq!(
        yaml.insufficient_capacity[0].until,
        Some(Duration::from_secs(1800))
    );
    let json = KwokConfig::parse(
        "kwok.json",
        r#"{"launchLatency": "10s", "devicePluginDelay": "30s"}"#,
    )
    .unwrap();
    assert_eq!(json.device_plugin_delay, yaml.device_plugin_delay);
}

#[test]
fn bad_files_fail_with_the_file_and_the_field() {
    for (text, needle) in [
        ("launchLatancy: 10s", "unknown field `launchLatancy`"),
        ("devicePluginDelay: 5", "missing unit"),
        ("capacity: [{ family: p5 }]", "missing field `max`"),
        (
            "insufficientCapacity: [{ family: p5, from: soon }]",
            "invalid duration",
        ),
    ] {
        let err = KwokConfig::parse("kwok.yaml", text).unwrap_err();
        assert!(matches!(err, KwokError::Parse { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("kwok.yaml: ") && msg.contains(needle),
            "{text}: {msg}"
        );
    }
    for (text, want) in [
        (
            "capacity: [{ family: p5, instanceType: p5.48xlarge, max: 1 }]",
            "kwok config: capacity[0]: set instanceType or family, not both",
        ),
        (
            "insufficientCapacity: [{ family: p5, from: 1h, until: 30m }]",
            "kwok config: insufficientCapacity[0].until: must be after from (1800s <= 3600s)",
        ),
    ] {
        assert_eq!(
            KwokConfig::parse("kwok.yaml", text)
                .unwrap_err()
                .to_string(),
            want
        );
    }
    let missing = std::path::Path::new("/nonexistent/kwok.yaml");
    let err = KwokConfig::from_path(missing).unwrap_err();
    assert!(matches!(err, KwokError::Read { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("/nonexistent/kwok.yaml: "),
        "{err}"
    );
}
