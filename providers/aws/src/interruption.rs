//! The interruption queue: EventBridge rules send EC2's notices to an SQS queue (spot
//! interruption warning, rebalance recommendation, AWS Health scheduled change, instance state
//! change), and each message becomes what the engine acts on. Parsing is pure and tested here.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

/// How long a spot instance lives after its interruption warning.
pub const SPOT_NOTICE: TimeDelta = TimeDelta::minutes(2);

/// What one message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The instances will be reclaimed at `at`.
    Interruption {
        /// Instance ids.
        instance_ids: Vec<String>,
        /// When they go.
        at: DateTime<Utc>,
    },
    /// The instances are stopping or gone.
    Stopped {
        /// Instance ids.
        instance_ids: Vec<String>,
    },
    /// Nothing to act on (a rebalance recommendation, a state change to running, another
    /// source): the message is deleted.
    Ignored(String),
}

#[derive(Deserialize)]
struct Envelope {
    source: Option<String>,
    #[serde(rename = "detail-type")]
    detail_type: Option<String>,
    time: Option<DateTime<Utc>>,
    #[serde(default)]
    detail: serde_json::Value,
}

fn ids_of(detail: &serde_json::Value) -> Vec<String> {
    if let Some(id) = detail.get("instance-id").and_then(|v| v.as_str()) {
        return vec![id.to_owned()];
    }
    detail
        .get("affectedEntities")
        .and_then(|v| v.as_array())
        .map(|entities| {
            entities
                .iter()
                .filter_map(|e| e.get("entityValue").and_then(|v| v.as_str()))
                .filter(|id| id.starts_with("i-"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// What the message `body` says, received at `now` (for messages without a time).
pub fn parse(body: &str, now: DateTime<Utc>) -> Notice {
    let Ok(envelope) = serde_json::from_str::<Envelope>(body) else {
        return Notice::Ignored("not an EventBridge event".into());
    };
    let at = envelope.time.unwrap_or(now);
    let ids = ids_of(&envelope.detail);
    let kind = envelope.detail_type.unwrap_or_default();
    match (envelope.source.as_deref(), kind.as_str()) {
        (Some("aws.ec2"), "EC2 Spot Instance Interruption Warning") => Notice::Interruption {
            instance_ids: ids,
            at: at + SPOT_NOTICE,
        },
        (Some("aws.health"), "AWS Health Event")
            if envelope.detail.get("service").and_then(|v| v.as_str()) == Some("EC2")
                && envelope
                    .detail
                    .get("eventTypeCategory")
                    .and_then(|v| v.as_str())
                    == Some("scheduledChange") =>
        {
            Notice::Interruption {
                instance_ids: ids,
                at,
            }
        }
        (Some("aws.ec2"), "EC2 Instance State-change Notification") => {
            match envelope.detail.get("state").and_then(|v| v.as_str()) {
                Some("stopping" | "stopped" | "shutting-down" | "terminated") => {
                    Notice::Stopped { instance_ids: ids }
                }
                other => Notice::Ignored(format!("state change to {}", other.unwrap_or("?"))),
            }
        }
        (_, "EC2 Instance Rebalance Recommendation") => {
            Notice::Ignored("rebalance recommendation".into())
        }
        (source, kind) => Notice::Ignored(format!(
            "{kind:?} from {}",
            source.unwrap_or("an unknown source")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    #[test]
    fn a_spot_warning_is_an_interruption_two_minutes_after_it() {
        let body = r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2024-05-01T10:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/i-0abc"],"detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#;
        assert_eq!(
            parse(body, now()),
            Notice::Interruption {
                instance_ids: vec!["i-0abc".into()],
                at: "2024-05-01T10:02:00Z".parse().unwrap(),
            }
        );
    }

    #[test]
    fn a_scheduled_change_is_an_interruption_of_every_affected_instance() {
        let body = r#"{"detail-type":"AWS Health Event","source":"aws.health","time":"2024-05-01T10:00:00Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}}"#;
        assert!(matches!(
            parse(body, now()),
            Notice::Interruption { instance_ids, .. } if instance_ids == ["i-1", "i-2"]
        ));
    }

    #[test]
    fn a_state_change_to_terminated_or_stopping_is_stopped_and_to_running_ignored() {
        let change = |state: &str| {
            format!(
                r#"{{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{{"instance-id":"i-9","state":"{state}"}}}}"#
            )
        };
        for state in ["terminated", "stopping", "shutting-down", "stopped"] {
            assert_eq!(
                parse(&change(state), now()),
                Notice::Stopped {
                    instance_ids: vec!["i-9".into()]
                }
            );
        }
        assert!(matches!(
            parse(&change("running"), now()),
            Notice::Ignored(_)
        ));
    }

    #[test]
    fn rebalance_recommendations_and_garbage_are_ignored() {
        let body = r#"{"detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":"i-1"}}"#;
        assert!(matches!(parse(body, now()), Notice::Ignored(_)));
        assert!(matches!(parse("not json", now()), Notice::Ignored(_)));
    }
}
