//! Node repair's reboot, carried out: the engine decides (`Action::Reboot`), this calls the
//! cloud. Throttled and transient failures are retried a few times with backoff; a cloud that
//! cannot reboot, or a call that keeps failing, is reported so the engine replaces the node.

use std::time::Duration;

use quartermaster_cloud::{CloudError, CloudProvider};

/// How many times a retryable failure is tried again.
const RETRIES: u32 = 3;
/// The first backoff (doubled after each try) when the cloud names none.
const BACKOFF: Duration = Duration::from_secs(2);

/// Reboots `provider_id` through `provider`. An instance already gone is fine (the engine
/// learns it from the cloud's events); `Err` carries why the node must be replaced instead.
pub async fn reboot(provider: &dyn CloudProvider, provider_id: &str) -> Result<(), String> {
    let mut wait = BACKOFF;
    for attempt in 0..=RETRIES {
        match provider.reboot(provider_id).await {
            Ok(()) | Err(CloudError::NotFound { .. }) => return Ok(()),
            Err(e) if e.is_retryable() && attempt < RETRIES => {
                let delay = match &e {
                    CloudError::Throttled {
                        retry_after: Some(d),
                    } => *d,
                    _ => wait,
                };
                tokio::time::sleep(delay).await;
                wait *= 2;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("reboot retries exhausted".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quartermaster_cloud::{CloudFuture, Instance, LaunchRequest};
    use quartermaster_pricing::InstanceType;
    use std::sync::Mutex;

    /// A cloud whose reboots answer from a script.
    struct Scripted {
        answers: Mutex<Vec<Result<(), CloudError>>>,
        calls: Mutex<u32>,
    }

    impl CloudProvider for Scripted {
        fn cloud(&self) -> quartermaster_pricing::Cloud {
            quartermaster_pricing::Cloud::Aws
        }
        fn create<'a>(&'a self, _: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
            unreachable!()
        }
        fn delete<'a>(&'a self, _: &'a str) -> CloudFuture<'a, ()> {
            unreachable!()
        }
        fn get<'a>(&'a self, _: &'a str) -> CloudFuture<'a, Instance> {
            unreachable!()
        }
        fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
            unreachable!()
        }
        fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
            unreachable!()
        }
        fn is_drifted<'a>(&'a self, _: &'a Instance) -> CloudFuture<'a, Option<String>> {
            unreachable!()
        }
        fn poll_events(&self) -> CloudFuture<'_, Vec<quartermaster_cloud::CloudEvent>> {
            unreachable!()
        }
        fn reboot<'a>(&'a self, _: &'a str) -> CloudFuture<'a, ()> {
            *self.calls.lock().unwrap() += 1;
            let answer = self.answers.lock().unwrap().remove(0);
            Box::pin(async move { answer })
        }
    }

    fn scripted(answers: Vec<Result<(), CloudError>>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers),
            calls: Mutex::new(0),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_is_retried_and_a_refusal_is_reported() {
        let cloud = scripted(vec![
            Err(CloudError::Throttled {
                retry_after: Some(Duration::from_secs(5)),
            }),
            Ok(()),
        ]);
        assert_eq!(reboot(&cloud, "aws:///a/i-1").await, Ok(()));
        assert_eq!(*cloud.calls.lock().unwrap(), 2);

        let cloud = scripted(vec![Err(CloudError::InvalidRequest {
            message: "cannot reboot".into(),
        })]);
        let err = reboot(&cloud, "aws:///a/i-1").await.unwrap_err();
        assert!(err.contains("cannot reboot"), "{err}");

        let cloud = scripted(vec![Err(CloudError::NotFound {
            provider_id: "aws:///a/i-1".into(),
        })]);
        assert_eq!(reboot(&cloud, "aws:///a/i-1").await, Ok(()));
    }
}
