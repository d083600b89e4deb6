use super::*;

fn parse(yaml: &str) -> Result<SimConfig, serde_norway::Error> {
    serde_norway::from_str(yaml)
}

#[test]
fn empty_file_is_the_default() {
    assert_eq!(parse("{}").unwrap(), SimConfig::default());
    let d = SimConfig::default();
    assert_eq!(d.launch_latency.for_family("m6i"), Duration::from_secs(40));
    assert_eq!(d.launch_latency.for_family("p5"), Duration::from_secs(180));
    assert_eq!(d.launch_latency.for_family("a3"), Duration::from_secs(180));
    assert_eq!(
        d.launch_latency.for_family("NDisrH100v5"),
        Duration::from_secs(180)
    );
    assert_eq!(
        d.registration_delay.for_family("p5"),
        Duration::from_secs(30)
    );
    assert_eq!(
        d.device_plugin_delay.for_family("g5"),
        Duration::from_secs(45)
    );
    assert_eq!(
        d.interruptions.notice_for(Cloud::Aws),
        Duration::from_secs(120)
    );
    assert_eq!(
        d.interruptions.notice_for(Cloud::Gcp),
        Duration::from_secs(30)
    );
    assert_eq!(
        d.interruptions.notice_for(Cloud::Azure),
        Duration::from_secs(30)
    );
    d.validate().unwrap();
}

#[test]
fn parses_a_full_file_with_go_durations() {
    let c = parse(
        r#"
launchLatency: { default: 90s, families: { p5: 5m, g5: 1h30m } }
registrationDelay: 2m
devicePluginDelay: 0
acceleratorsNeverReady: 0.25
capacity:
  - { family: p5, capacityType: spot, max: 2 }
  - { instanceType: g5.xlarge, zone: us-east-1a, max: 0 }
insufficientCapacity:
  - { instanceType: p5.48xlarge, zone: us-east-1a, from: 5m, until: 2h }
  - { family: g6, capacityType: on-demand }
interruptions: { spotRatePerHour: 0.5, notice: 90s }
api: { throttleProbability: 0.1 }
"#,
    )
    .unwrap();
    c.validate().unwrap();
    assert_eq!(c.launch_latency.default, Duration::from_secs(90));
    assert_eq!(c.launch_latency.for_family("p5"), Duration::from_secs(300));
    assert_eq!(c.launch_latency.for_family("g5"), Duration::from_secs(5400));
    // A table in a file replaces the default one, per-family entries included.
    assert_eq!(c.launch_latency.for_family("a3"), Duration::from_secs(90));
    assert_eq!(
        c.registration_delay,
        LatencyTable::uniform(Duration::from_secs(120))
    );
    assert_eq!(c.device_plugin_delay, LatencyTable::uniform(Duration::ZERO));
    assert_eq!(c.accelerators_never_ready, 0.25);
    assert_eq!(
        c.capacity[0],
        CapacityLimit {
            instance_type: None,
            family: Some("p5".into()),
            zone: None,
            capacity_type: Some(CapacityType::Spot),
            max: 2,
        }
    );
    assert_eq!(c.capacity[1].max, 0);
    assert_eq!(c.insufficient_capacity[0].from, Duration::from_secs(300));
    assert_eq!(
        c.insufficient_capacity[0].until,
        Some(Duration::from_secs(7200))
    );
    assert_eq!(c.insufficient_capacity[1].from, Duration::ZERO);
    assert_eq!(c.insufficient_capacity[1].until, None);
    assert_eq!(c.interruptions.spot_rate_per_hour, 0.5);
    assert_eq!(
        c.interruptions.notice_for(Cloud::Aws),
        Duration::from_secs(90)
    );
    assert_eq!(c.api.throttle_probability, 0.1);
    // Fields not given keep their defaults.
    let partial = parse("interruptions: { spotRatePerHour: 1 }").unwrap();
    assert_eq!(partial.interruptions.notice, None);
    assert_eq!(partial.launch_latency, SimConfig::default().launch_latency);
}

#[test]
fn rejects_unknown_fields_and_bad_durations() {
    for (yaml, needle) in [
        ("launchLatancy: 40s", "unknown field `launchLatancy`"),
        ("api: { throttle: 0.1 }", "unknown field `throttle`"),
        (
            "launchLatency: { default: 40s, p5: 3m }",
            "unknown field `p5`",
        ),
        (
            "capacity: [{ family: p5, max: 1, region: x }]",
            "unknown field `region`",
        ),
        ("capacity: [{ family: p5 }]", "missing field `max`"),
        (
            "launchLatency: { families: { p5: 3m } }",
            "missing field `default`",
        ),
        ("registrationDelay: 30", "missing unit"),
        ("registrationDelay: 5d", "unknown unit \"d\""),
        ("interruptions: { notice: -1s }", "negative"),
        (
            "insufficientCapacity: [{ family: p5, from: soon }]",
            "invalid duration \"soon\"",
        ),
        (
            "capacity: [{ family: p5, capacityType: preemptible, max: 1 }]",
            "preemptible",
        ),
    ] {
        let err = parse(yaml).unwrap_err().to_string();
        assert!(err.contains(needle), "{yaml}: {err}");
    }
}

#[test]
fn validation_names_the_field() {
    let cases: [(SimConfig, &str); 6] = [
            (
                SimConfig {
                    accelerators_never_ready: -0.1,
                    ..SimConfig::default()
                },
                "simulation config: acceleratorsNeverReady: must be a probability between 0 and 1, got -0.1",
            ),
            (
                SimConfig {
                    api: ApiBehaviour {
                        throttle_probability: 1.5,
                        ..ApiBehaviour::default()
                    },
                    ..SimConfig::default()
                },
                "simulation config: api.throttleProbability: must be a probability between 0 and 1, got 1.5",
            ),
            (
                SimConfig {
                    accelerators_never_ready: f64::NAN,
                    ..SimConfig::default()
                },
                "simulation config: acceleratorsNeverReady: must be a probability between 0 and 1, got NaN",
            ),
            (
                SimConfig {
                    interruptions: InterruptionConfig {
                        spot_rate_per_hour: -1.0,
                        notice: None,
                    },
                    ..SimConfig::default()
                },
                "simulation config: interruptions.spotRatePerHour: must be a finite number >= 0, got -1",
            ),
            (
                parse("capacity: [{ family: p5, max: 1 }, { family: p5, instanceType: p5.48xlarge, max: 1 }]")
                    .unwrap(),
                "simulation config: capacity[1]: set instanceType or family, not both",
            ),
            (
                parse("insufficientCapacity: [{ family: p5, from: 1h, until: 30m }]").unwrap(),
                "simulation config: insufficientCapacity[0].until: must be after from (1800s <= 3600s)",
            ),
        ];
    for (config, want) in cases {
        assert_eq!(config.validate().unwrap_err().to_string(), want);
    }
}
