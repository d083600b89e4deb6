//! SSM parameters over `aws-sdk-ssm`.

use aws_sdk_ssm::Client;

use crate::port::{Parameters, PortFuture};
use crate::rate::RateLimits;
use crate::sdk::api_error;

/// SSM through the SDK.
pub struct SsmParameters {
    client: Client,
    limits: RateLimits,
}

impl SsmParameters {
    /// Parameters through `client`.
    pub fn new(client: Client, limits: RateLimits) -> Self {
        Self { client, limits }
    }
}

impl Parameters for SsmParameters {
    fn get_parameter(&self, name: String) -> PortFuture<'_, Option<String>> {
        Box::pin(async move {
            self.limits.read().await;
            match self.client.get_parameter().name(name).send().await {
                Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_owned)),
                Err(e) => {
                    let e = api_error(e);
                    if e.code.as_deref() == Some("ParameterNotFound") {
                        Ok(None)
                    } else {
                        Err(e)
                    }
                }
            }
        })
    }
}
