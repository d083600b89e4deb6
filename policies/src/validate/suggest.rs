//! "Did you mean": the one known name a misspelt field name, enum value or label key was most
//! likely meant to be.

use crate::labels::{LABEL_ALIASES, WELL_KNOWN_LABELS};

/// The candidate `input` was most likely meant to be, or `None` when no candidate is close.
///
/// Close means a Damerau-Levenshtein distance (optimal string alignment, ignoring case) of at
/// most 2 and at most a third of the candidate's length, so `requirments` → `requirements`,
/// `in` → `In`, `spott` → `spot`, but `Gx` suggests nothing. When two candidates are equally
/// close, none is suggested (at most one suggestion, never a guess between two).
pub(crate) fn closest<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = input.to_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    let mut tie = false;
    for candidate in candidates {
        if candidate == input {
            return None;
        }
        let distance = strsim::osa_distance(&lower, &candidate.to_lowercase());
        let close = distance <= 2 && distance * 3 <= candidate.chars().count();
        if !close {
            continue;
        }
        match best {
            Some((d, c)) if d == distance && c != candidate => tie = true,
            Some((d, _)) if d <= distance => {}
            _ => {
                best = Some((distance, candidate));
                tie = false;
            }
        }
    }
    best.filter(|_| !tie).map(|(_, c)| c)
}

/// `; did you mean "x"?` when a candidate is close to `input`, else nothing.
pub(crate) fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    closest(input, candidates)
        .map(|c| format!("; did you mean {c:?}?"))
        .unwrap_or_default()
}

/// Every label key Quartermaster knows: its well-known labels and the alias keys of
/// [`LABEL_ALIASES`].
pub(crate) fn known_label_keys() -> impl Iterator<Item = &'static str> {
    WELL_KNOWN_LABELS
        .iter()
        .copied()
        .chain(LABEL_ALIASES.iter().map(|a| a.key))
}

/// The known label key `key` was probably meant to be (`karpenter.sh/capacity_type` →
/// `karpenter.sh/capacity-type`), or `None` when `key` is known or close to none. For messages
/// about pod node selectors and affinities as much as NodePool requirements.
pub fn suggest_label_key(key: &str) -> Option<&'static str> {
    if known_label_keys().any(|k| k == key) {
        return None;
    }
    closest(key, known_label_keys())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested_far_ones_and_ties_are_not() {
        let fields = ["requirements", "nodeClassRef", "taints", "startupTaints"];
        assert_eq!(closest("requirments", fields), Some("requirements"));
        assert_eq!(closest("nodeClasRef", fields), Some("nodeClassRef"));
        assert_eq!(closest("nodeclassref", fields), Some("nodeClassRef"));
        assert_eq!(closest("replicas", fields), None);
        let ops = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
        assert_eq!(closest("in", ops), Some("In"));
        assert_eq!(closest("Exist", ops), Some("Exists"));
        assert_eq!(closest("Notin", ops), Some("NotIn"));
        // Two letters allow no edit, only a change of case.
        assert_eq!(closest("Gx", ops), None);
        assert_eq!(
            closest("In", ops),
            None,
            "an exact name needs no suggestion"
        );
        assert_eq!(
            closest("spott", ["spot", "on-demand", "reserved"]),
            Some("spot")
        );
        assert_eq!(
            closest("ondemand", ["spot", "on-demand", "reserved"]),
            Some("on-demand")
        );
        // Equally close to two names: no guess.
        assert_eq!(closest("ab", ["abc", "abd"]), None);
        assert_eq!(
            did_you_mean(
                "WhenEmptyOrUnderutilised",
                ["WhenEmpty", "WhenEmptyOrUnderutilized"]
            ),
            "; did you mean \"WhenEmptyOrUnderutilized\"?"
        );
        assert_eq!(did_you_mean("Balance2", ["WhenEmpty"]), "");
    }

    #[test]
    fn misspelt_label_keys_find_the_known_key() {
        for (typo, meant) in [
            ("karpenter.sh/capacity_type", "karpenter.sh/capacity-type"),
            (
                "node.kubernetes.io/instance_type",
                "node.kubernetes.io/instance-type",
            ),
            (
                "karpenter.k8s.aws/instance-familly",
                "karpenter.k8s.aws/instance-family",
            ),
            (
                "quartermaster.dev/capacitytype",
                "quartermaster.dev/capacity-type",
            ),
            (
                "topology.kubernetes.io/zones",
                "topology.kubernetes.io/zone",
            ),
        ] {
            assert_eq!(closest(typo, known_label_keys()), Some(meant), "{typo}");
        }
        assert_eq!(closest("example.com/team", known_label_keys()), None);
        assert_eq!(
            suggest_label_key("karpenter.sh/capacity_type"),
            Some("karpenter.sh/capacity-type")
        );
        assert_eq!(suggest_label_key("karpenter.sh/capacity-type"), None);
    }
}
