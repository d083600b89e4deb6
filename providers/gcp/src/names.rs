//! Deterministic names: the instance name of a NodeClaim, the `requestId` of one insert, and
//! label keys and values Compute Engine accepts.

use uuid::Uuid;

/// The UUID namespace of Quartermaster's GCP request ids (a fixed random UUID).
const REQUEST_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2b8e_4d3a_4c71_9e55_0a7d_3b2c_1f90);

/// The longest name or label Compute Engine accepts.
const MAX_LEN: usize = 63;

/// The instance name for `claim`: `qm-` and the claim name in Compute Engine's alphabet
/// (lower-case letters, digits, `-`), shortened with a hash suffix when too long. The same
/// claim always gives the same name, so a second insert for it fails with "already exists".
pub fn instance_name(claim: &str) -> String {
    let body = sanitize(claim);
    let name = format!("qm-{body}");
    if name.len() <= MAX_LEN && name == format!("qm-{claim}") {
        return name;
    }
    // Sanitized or too long: keep it unique with a hash of the original claim name.
    let hash = Uuid::new_v5(&REQUEST_NAMESPACE, claim.as_bytes())
        .simple()
        .to_string();
    let keep = MAX_LEN - 3 - 1 - 8;
    let mut body: String = body.chars().take(keep).collect();
    while body.ends_with('-') {
        body.pop();
    }
    format!("qm-{body}-{}", &hash[..8])
}

/// The `requestId` of the insert of `claim` on one offering: a UUID derived from the claim
/// name and the offering (`provisioning`: `spot`, `standard`, `reserved`, `flex-start`). A
/// retried insert of the same offering is deduplicated by Compute Engine; a fallback offering
/// gets its own id (reusing the id would return the failed operation of the offering before
/// it).
pub fn request_id(claim: &str, machine_type: &str, zone: &str, provisioning: &str) -> String {
    let key = format!("{claim}/{machine_type}/{zone}/{provisioning}");
    Uuid::new_v5(&REQUEST_NAMESPACE, key.as_bytes()).to_string()
}

/// The label value that records which boot image (or instance template) an instance was
/// started from: a short stable hash, since image URLs outgrow label values. Drift compares it
/// with the NodeClass's current image.
pub fn image_label(image: &str) -> String {
    Uuid::new_v5(&REQUEST_NAMESPACE, format!("image/{image}").as_bytes())
        .simple()
        .to_string()[..16]
        .to_owned()
}

/// `value` as a label value: lower-case letters, digits, `-` and `_`, at most 63 characters.
pub fn label_value(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .take(MAX_LEN)
        .collect()
}

/// `key` as a label key: like a value, and starting with a letter.
pub fn label_key(key: &str) -> String {
    let v = label_value(key);
    if v.starts_with(|c: char| c.is_ascii_lowercase()) {
        v
    } else {
        label_value(&format!("k-{v}"))
    }
}

fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    while out.ends_with('-') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_claim_name_is_kept() {
        assert_eq!(instance_name("gpu-pool-abc12"), "qm-gpu-pool-abc12");
    }

    #[test]
    fn dots_and_long_names_get_a_hash_and_stay_valid() {
        let a = instance_name("pool.with.dots");
        assert!(a.starts_with("qm-pool-with-dots-"), "{a}");
        assert_ne!(a, instance_name("pool-with-dots"));
        let long = instance_name(&"x".repeat(200));
        assert!(long.len() <= 63, "{long}");
        assert_eq!(long, instance_name(&"x".repeat(200)));
    }

    #[test]
    fn request_ids_are_stable_per_offering() {
        let a = request_id("c1", "a2-highgpu-1g", "us-central1-a", "spot");
        assert_eq!(
            a,
            request_id("c1", "a2-highgpu-1g", "us-central1-a", "spot")
        );
        assert_ne!(
            a,
            request_id("c1", "a2-highgpu-1g", "us-central1-b", "spot")
        );
        assert_ne!(
            a,
            request_id("c2", "a2-highgpu-1g", "us-central1-a", "spot")
        );
        assert_ne!(
            request_id("c1", "a2-highgpu-1g", "us-central1-a", "standard"),
            request_id("c1", "a2-highgpu-1g", "us-central1-a", "reserved")
        );
        assert_eq!(a.len(), 36);
    }

    #[test]
    fn labels_are_in_the_gce_alphabet() {
        assert_eq!(
            label_key("quartermaster.dev/nodepool"),
            "quartermaster-dev-nodepool"
        );
        assert_eq!(label_key("1abc"), "k-1abc");
        assert_eq!(label_value("Pool.A"), "pool-a");
    }
}
