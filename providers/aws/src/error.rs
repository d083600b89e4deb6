//! The AWS crate's one error type: what can go wrong before any EC2 call (settings, user
//! data, NodeClass content). EC2 call failures are [`quartermaster_cloud::CloudError`]s.

/// A setup or NodeClass problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsError {
    /// The settings cannot work (a missing cluster endpoint, a bad endpoint URL).
    #[error("AWS settings: {0}")]
    Settings(String),
    /// The user data cannot be built (the NodeClass's `userData` is not valid MIME).
    #[error("user data: {0}")]
    UserData(String),
    /// The AWSNodeClass asks for something this provider cannot do (yet).
    #[error("AWSNodeClass: {0}")]
    NodeClass(String),
    /// The Spot Instance Advisor data is not in the shape it is published in.
    #[error("Spot Advisor data: {0}")]
    SpotAdvisor(String),
}

impl From<AwsError> for quartermaster_cloud::CloudError {
    fn from(e: AwsError) -> Self {
        quartermaster_cloud::CloudError::InvalidRequest {
            message: e.to_string(),
        }
    }
}
