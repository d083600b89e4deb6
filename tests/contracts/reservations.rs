//! Reserved capacity in `plan` and `explain` (`--reservations FILE`): free slots are used
//! before anything is bought, what is left in each reservation is reported (`reservations` in
//! `plan -o json`, a "Reserved capacity" table), planned nodes in a reservation name it, and
//! `explain` says why a pod did or did not use each reservation. Built on
//! `examples/reservations/`.

use quartermaster_tests::{Output, path, quartermaster};
use serde_json::Value;

const POOL: &str = "examples/reservations/nodepool.yaml";
const BLOCK: &str = "examples/reservations/h100-block.yaml";
const JOBS: &str = "examples/reservations/training-jobs.yaml";
/// Inside the block's window (2027-01-11T11:30Z to 2027-01-14T11:30Z).
const OPEN: &str = "2027-01-12T00:00:00Z";

fn temp_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("qm-reservations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write temp file");
    file.display().to_string()
}

/// The example's block with `count` slots.
fn block_of(count: u32) -> String {
    let text = std::fs::read_to_string(path(BLOCK)).unwrap();
    assert!(text.contains("count: 4"));
    temp_file(
        &format!("block-{count}.yaml"),
        &text.replace("count: 4", &format!("count: {count}")),
    )
}

/// `jobs` one-node 8-GPU training pods (the example's Job with fewer completions).
fn jobs(n: u32) -> String {
    let text = std::fs::read_to_string(path(JOBS)).unwrap();
    assert!(text.contains("completions: 6") && text.contains("parallelism: 6"));
    temp_file(
        &format!("jobs-{n}.yaml"),
        &text
            .replace("completions: 6", &format!("completions: {n}"))
            .replace("parallelism: 6", &format!("parallelism: {n}")),
    )
}

fn run(args: &[&str]) -> Output {
    let out = quartermaster(args);
    assert_eq!(
        out.code, 0,
        "{args:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out
}

fn plan(files: &[&str], reservations: &str, at: &str, format: &str) -> Output {
    let mut args = vec![
        "plan",
        "-o",
        format,
        "--reservations",
        reservations,
        "--at",
        at,
    ];
    for f in files {
        args.extend(["-f", f]);
    }
    run(&args)
}

fn explain(pod: &str, files: &[&str], reservations: &str, at: &str) -> Value {
    let mut args = vec![
        "explain",
        "pod",
        pod,
        "-o",
        "json",
        "--reservations",
        reservations,
        "--at",
        at,
    ];
    for f in files {
        args.extend(["-f", f]);
    }
    run(&args).json()
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is a string: {v:#}"))
}

#[test]
fn two_eight_gpu_jobs_and_a_block_of_one_use_the_block_and_buy_one() {
    let pool = path(POOL);
    let block = block_of(1);
    let two = jobs(2);
    let p = plan(&[&pool, &two], &block, OPEN, "json").json();
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{p:#}");
    let reserved: Vec<&Value> = nodes
        .iter()
        .filter(|n| n["capacity_type"] == "reserved")
        .collect();
    assert_eq!(reserved.len(), 1, "one node in the block: {p:#}");
    assert_eq!(reserved[0]["reservation"], "cr-0h100block");
    assert_eq!(reserved[0]["instance_type"], "p5.48xlarge");
    assert_eq!(reserved[0]["zone"], "us-east-1a");
    assert_eq!(reserved[0]["price_per_hour"], 0.0);
    assert_eq!(reserved[0]["pods"].as_array().unwrap().len(), 1);
    let bought: Vec<&Value> = nodes
        .iter()
        .filter(|n| n["capacity_type"] == "on-demand")
        .collect();
    assert_eq!(bought.len(), 1, "the other bought on-demand: {p:#}");
    assert_eq!(bought[0]["reservation"], Value::Null);
    // The cost is the bought node's alone: the block is paid whether used or not.
    let price = bought[0]["price_per_hour"].as_f64().unwrap();
    assert!(
        (p["cost_per_hour"].as_f64().unwrap() - price).abs() < 1e-6,
        "{p:#}"
    );
    // Nothing is left in the block.
    let rs = p["reservations"].as_array().unwrap();
    assert_eq!(rs.len(), 1);
    let r = &rs[0];
    for (key, want) in [("count", 1), ("free", 1), ("used", 1), ("left", 0)] {
        assert_eq!(r[key], want, "{key}: {r:#}");
    }
    assert_eq!(r["pools"], serde_json::json!(["h100"]));
    // Without the file the same input buys both.
    let out = run(&["plan", "-o", "json", "-f", &pool, "-f", &two]).json();
    let capacity: Vec<&str> = out["new_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| str_of(n, "capacity_type"))
        .collect();
    assert_eq!(capacity, ["on-demand", "on-demand"], "{out:#}");
    assert_eq!(out["reservations"], serde_json::json!([]));
}

#[test]
fn plan_json_reservations_carry_the_promised_keys() {
    let p = plan(&[&path(POOL), &path(JOBS)], &path(BLOCK), OPEN, "json").json();
    let r = &p["reservations"][0];
    for key in [
        "id",
        "cloud",
        "type",
        "instance_type",
        "zone",
        "count",
        "free",
        "used",
        "left",
        "end",
        "pools",
    ] {
        assert!(r.get(key).is_some(), "reservations[0] lacks {key}: {r:#}");
    }
    assert_eq!(r["id"], "cr-0h100block");
    assert_eq!(r["cloud"], "aws");
    assert_eq!(r["type"], "capacity-block");
    assert_eq!(r["end"], "2027-01-14T11:30:00Z");
    assert_eq!(r["drain_at"], "2027-01-14T10:50:00Z");
    assert_eq!(r["status"], "open");
    // Six one-node jobs, a block of four: four in the block, two bought.
    assert_eq!(
        (r["free"].clone(), r["used"].clone(), r["left"].clone()),
        (4.into(), 4.into(), 0.into())
    );
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 6);
    for n in nodes {
        assert!(
            n.get("reservation").is_some(),
            "every new node has reservation: {n:#}"
        );
        let reserved = n["capacity_type"] == "reserved";
        assert_eq!(reserved, n["reservation"] == "cr-0h100block", "{n:#}");
    }
    assert_eq!(
        nodes
            .iter()
            .filter(|n| n["capacity_type"] == "reserved")
            .count(),
        4
    );
}

#[test]
fn plan_table_has_a_reserved_capacity_section() {
    let out = plan(&[&path(POOL), &path(JOBS)], &path(BLOCK), OPEN, "table");
    let text = &out.stdout;
    assert!(text.contains("\nReserved capacity:\n"), "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with("ID "))
        .unwrap_or_else(|| panic!("{text}"));
    for column in [
        "TYPE",
        "ZONE",
        "INSTANCE TYPE",
        "COUNT",
        "FREE",
        "USED",
        "LEFT",
        "END",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("cr-0h100block "))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..9],
        [
            "cr-0h100block",
            "capacity-block",
            "us-east-1a",
            "p5.48xlarge",
            "4",
            "4",
            "4",
            "0",
            "2027-01-14T11:30:00Z"
        ],
        "{text}"
    );
    assert!(
        text.contains("(drain 2027-01-14T10:50:00Z)"),
        "a block's drain time: {text}"
    );
    assert!(
        text.contains("4 of the new node(s) launch into reservations, at no added cost."),
        "{text}"
    );
    assert_eq!(
        text.matches("reserved (cr-0h100block)").count(),
        4,
        "each node in the block names it: {text}"
    );
}

#[test]
fn a_block_that_is_not_open_or_draining_is_not_used() {
    let pool = path(POOL);
    let two = jobs(2);
    for (at, status, note) in [
        (
            "2027-01-10T00:00:00Z",
            "not-open",
            "not open yet: opens 2027-01-11T11:30:00Z",
        ),
        (
            "2027-01-14T11:00:00Z",
            "draining",
            "draining since 2027-01-14T10:50:00Z",
        ),
    ] {
        let p = plan(&[&pool, &two], &path(BLOCK), at, "json").json();
        let r = &p["reservations"][0];
        assert_eq!(r["status"], status, "{r:#}");
        assert_eq!(r["used"], 0, "{r:#}");
        assert!(str_of(r, "note").starts_with(note), "{r:#}");
        assert!(
            p["new_nodes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["capacity_type"] == "on-demand"),
            "{p:#}"
        );
        let e = explain("research/finetune-0", &[&pool, &two], &path(BLOCK), at);
        assert_eq!(e["reservations"][0]["verdict"], status, "{e:#}");
        assert_eq!(e["reservation"], Value::Null);
    }
}

#[test]
fn explain_says_the_pod_used_the_block_or_found_it_full() {
    let pool = path(POOL);
    let block = block_of(1);
    let two = jobs(2);
    let files = [pool.as_str(), two.as_str()];
    let answers: Vec<Value> = ["research/finetune-0", "research/finetune-1"]
        .iter()
        .map(|pod| explain(pod, &files, &block, OPEN))
        .collect();
    let used: Vec<&Value> = answers
        .iter()
        .filter(|e| e["reservation"] == "cr-0h100block")
        .collect();
    assert_eq!(
        used.len(),
        1,
        "one of the two is in the block: {answers:#?}"
    );
    let on = used[0];
    assert_eq!(on["reservations"][0]["verdict"], "used", "{on:#}");
    assert_eq!(on["outcome"]["kind"], "existing-node");
    assert_eq!(on["outcome"]["reservation"], "cr-0h100block");
    let off = answers.iter().find(|e| e["reservation"].is_null()).unwrap();
    let v = &off["reservations"][0];
    for key in ["id", "type", "instance_type", "zone", "verdict", "reason"] {
        assert!(v.get(key).is_some(), "{key}: {v:#}");
    }
    assert_eq!(v["verdict"], "full", "{off:#}");
    let reason = str_of(v, "reason");
    assert!(
        reason.starts_with("full: its 1 free slot(s) hold other pods of this plan (")
            && reason.contains(str_of(on, "pod")),
        "names the pod in the slot: {reason}"
    );
    assert_eq!(off["outcome"]["kind"], "new-node");
    assert_eq!(off["outcome"]["capacity_type"], "on-demand");
    // Reserved offerings are never candidates to buy.
    assert!(
        off["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["capacity_type"] != "reserved"),
        "{off:#}"
    );
    // The table says it too.
    let table = run(&[
        "explain",
        "pod",
        str_of(off, "pod"),
        "-f",
        &pool,
        "-f",
        &two,
        "--reservations",
        &block,
        "--at",
        OPEN,
    ])
    .stdout;
    assert!(
        table.contains("Reservation: none used (cr-0h100block: full)."),
        "{table}"
    );
    assert!(table.contains("\nReservations:\n"), "{table}");
}

#[test]
fn explain_says_which_rule_kept_a_pod_out_of_a_reservation() {
    let block = path(BLOCK);
    let pool = path(POOL);
    let one = jobs(1);
    let pool_text = std::fs::read_to_string(path(POOL)).unwrap();
    // The pool does not allow capacity type reserved.
    let no_reserved = temp_file(
        "no-reserved.yaml",
        &pool_text.replace(
            r#"values: ["reserved", "on-demand"]"#,
            r#"values: ["on-demand"]"#,
        ),
    );
    // The NodeClass selects another reservation.
    let other = temp_file(
        "other-id.yaml",
        &pool_text.replace("- id: cr-0h100block", "- id: cr-0other"),
    );
    // The pod wants another zone.
    let elsewhere = temp_file(
        "elsewhere.yaml",
        &std::fs::read_to_string(&one).unwrap().replace(
            "      restartPolicy: Never\n",
            "      restartPolicy: Never\n      nodeSelector: {topology.kubernetes.io/zone: us-east-1b}\n",
        ),
    );
    for (files, verdict, reason) in [
        (
            [no_reserved.as_str(), one.as_str()],
            "pool-excludes",
            "NodePool h100's requirements exclude it: quartermaster.dev/capacity-type In [on-demand]",
        ),
        (
            [other.as_str(), one.as_str()],
            "not-selected",
            "no NodePool's NodeClass selects it",
        ),
        (
            [pool.as_str(), elsewhere.as_str()],
            "does-not-fit",
            "a p5.48xlarge in us-east-1a of NodePool h100 cannot hold the pod: node selector / affinity: topology.kubernetes.io/zone",
        ),
    ] {
        let e = explain("research/finetune-0", &files, &block, OPEN);
        let v = &e["reservations"][0];
        assert_eq!(v["verdict"], verdict, "{e:#}");
        assert!(str_of(v, "reason").starts_with(reason), "{v:#}");
        assert_eq!(e["reservation"], Value::Null);
    }
}

#[test]
fn a_bad_reservations_file_names_the_entry_and_the_field() {
    let text = std::fs::read_to_string(path(BLOCK)).unwrap();
    let bad = temp_file("bad.yaml", &text.replace("count: 4", "count: -4"));
    let out = quartermaster(&[
        "plan",
        "-f",
        &path(POOL),
        "-f",
        &path(JOBS),
        "--reservations",
        &bad,
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("error: ")
            && out
                .stderr
                .contains("bad.yaml: reservations[0] (cr-0h100block): count: expected a whole number of instances, found -4"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}
