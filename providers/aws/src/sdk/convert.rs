//! SDK values in port terms: errors (with their code, status and `Retry-After`), filters, tags, times and instances.

use super::*;

/// An SDK error in port terms. The message is the error chain (service words or transport
/// cause); requests are signed, so it never holds a credential.
pub(crate) fn api_error<E>(e: SdkError<E, HttpResponse>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let (kind, code, message, status, retry_after) = match &e {
        SdkError::ServiceError(ctx) => {
            let raw = ctx.raw();
            let retry_after = raw
                .headers()
                .get("retry-after")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let status = raw.status().as_u16();
            let code = ctx.err().code().map(str::to_owned);
            // Without the service's words, say what came back: `DisplayErrorContext` would
            // append the whole raw response (megabytes for a DescribeInstanceTypes page).
            let message = match (ctx.err().message(), &code) {
                (Some(m), Some(_)) => m.to_owned(),
                (Some(m), None) => format!("AWS answered HTTP {status} without an error code: {m}"),
                (None, Some(_)) => format!("AWS answered HTTP {status} without a message"),
                (None, None) => format!(
                    "AWS answered HTTP {status} with a response that could not be read: {}",
                    causes(
                        ctx.err()
                            .source()
                            .unwrap_or(ctx.err() as &(dyn std::error::Error + 'static))
                    )
                ),
            };
            (
                ApiErrorKind::Service,
                code,
                message,
                Some(status),
                retry_after,
            )
        }
        SdkError::TimeoutError(_) => (
            ApiErrorKind::Timeout,
            None,
            DisplayErrorContext(&e).to_string(),
            None,
            None,
        ),
        SdkError::DispatchFailure(d) => (
            if d.is_timeout() {
                ApiErrorKind::Timeout
            } else {
                ApiErrorKind::Dispatch
            },
            None,
            DisplayErrorContext(&e).to_string(),
            None,
            None,
        ),
        SdkError::ConstructionFailure(_) => (
            ApiErrorKind::Construction,
            None,
            DisplayErrorContext(&e).to_string(),
            None,
            None,
        ),
        // A response that could not be read (its raw body left out of the message).
        _ => (
            ApiErrorKind::Response,
            None,
            format!(
                "the AWS response could not be read: {}",
                causes(
                    std::error::Error::source(&e)
                        .unwrap_or(&e as &(dyn std::error::Error + 'static))
                )
            ),
            None,
            None,
        ),
    };
    ApiError {
        kind,
        code,
        message,
        status,
        retry_after,
    }
}

/// An error and its causes, `: `-joined (without the `Debug` dump `DisplayErrorContext` adds).
pub(super) fn causes(e: &dyn std::error::Error) -> String {
    let mut words = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        words.push_str(": ");
        words.push_str(&cause.to_string());
        source = cause.source();
    }
    words
}

pub(super) fn filters(filters: Vec<Filter>) -> Option<Vec<t::Filter>> {
    if filters.is_empty() {
        return None;
    }
    Some(
        filters
            .into_iter()
            .map(|f| {
                t::Filter::builder()
                    .name(f.name)
                    .set_values(Some(f.values))
                    .build()
            })
            .collect(),
    )
}

pub(super) fn tags_of(tags: &[t::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_owned(),
                t.value().unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

pub(super) fn sdk_tags(tags: &BTreeMap<String, String>) -> Vec<t::Tag> {
    tags.iter()
        .map(|(k, v)| t::Tag::builder().key(k).value(v).build())
        .collect()
}

pub(super) fn chrono_time(dt: &aws_smithy_types::DateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(dt.secs(), dt.subsec_nanos())
}

/// An instance of a DescribeInstances response. One without an id is an error, not skipped:
/// skipped, the instance of a claim would look gone (a launch retried after it would launch a
/// second one, a delete would answer NotFound and leave it running).
pub(super) fn instance(i: &t::Instance) -> Result<Ec2Instance, ApiError> {
    let Some(id) = i.instance_id() else {
        return Err(ApiError {
            kind: ApiErrorKind::Response,
            code: None,
            message: "DescribeInstances answered an instance without an instanceId".to_owned(),
            status: None,
            retry_after: None,
        });
    };
    Ok(Ec2Instance {
        id: id.to_owned(),
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default(),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_owned(),
        capacity_type: match i.instance_lifecycle() {
            Some(t::InstanceLifecycleType::Spot) => CapacityType::Spot,
            // Launched into an ODCR or a Capacity Block.
            _ if i.capacity_reservation_id().is_some_and(|r| !r.is_empty()) => {
                CapacityType::Reserved
            }
            _ => CapacityType::OnDemand,
        },
        state: i
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_owned())
            .unwrap_or_default(),
        launch_time: i.launch_time().and_then(chrono_time),
        image_id: i.image_id().map(str::to_owned),
        subnet_id: i.subnet_id().map(str::to_owned),
        security_group_ids: i
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_owned))
            .collect(),
        tags: tags_of(i.tags()),
    })
}

pub(super) fn capacity_of(lifecycle: Option<&t::InstanceLifecycle>) -> Option<CapacityType> {
    match lifecycle? {
        t::InstanceLifecycle::Spot => Some(CapacityType::Spot),
        t::InstanceLifecycle::OnDemand => Some(CapacityType::OnDemand),
        _ => None,
    }
}
