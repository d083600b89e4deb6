//! The [`Arm`] port over `azure_mgmt_compute` (API version 2024-07-01): VM PUT and restart
//! with `.send()` only (the crate's long-running-operation future re-sends the PUT in a loop, so
//! operations are followed here through their `Azure-AsyncOperation` URL), GET, DELETE, list,
//! resource SKUs, and capacity reservation groups with their reservations. The pipeline never retries (the engine decides) and a small policy of ours keeps the
//! ARM error code, status and `Retry-After` of every failed response.
//!
//! Requests are built from, and responses read as, the REST JSON shapes: the crate's models are
//! filled from JSON, so what we send is exactly what ARM documents.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use azure_core::auth::TokenCredential;
use azure_core::error::ErrorKind;
use azure_core::headers::{HeaderName, Headers};
use azure_core::{
    ClientOptions, Context, HttpClient, Method, Pipeline, Policy, PolicyResult, Request,
    RetryOptions, TransportOptions, Url,
};
use azure_mgmt_compute::package_2024_07_01 as compute;
use compute::models;
use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::config::{AzureSettings, CredentialSource};
use crate::names::group_parts;
use crate::port::{
    Accepted, ApiError, ApiErrorKind, Arm, CapacityReservation, ImageRef, OperationStatus,
    PortFuture, Sku, Started, Usage, Vm, VmSpec,
};
use crate::rate::RateLimits;

/// The Resource Manager API version of resource group GETs (doctor).
const RESOURCE_GROUPS_API_VERSION: &str = "2021-04-01";

/// The port over the SDK client, in one subscription and resource group.
pub(crate) struct SdkArm {
    client: compute::Client,
    pipeline: Pipeline,
    credential: Arc<dyn TokenCredential>,
    scopes: Vec<String>,
    endpoint: Url,
    subscription: String,
    resource_group: String,
    limits: RateLimits,
}

impl SdkArm {
    /// The client for `settings` (the credential from the settings' source).
    pub(crate) fn new(settings: &AzureSettings, limits: RateLimits) -> Result<Self, ApiError> {
        let endpoint = Url::parse(settings.endpoint()).map_err(|e| {
            ApiError::other(
                ApiErrorKind::Credential,
                format!(
                    "bad Resource Manager endpoint {:?}: {e}",
                    settings.endpoint()
                ),
            )
        })?;
        let credential = credential(&settings.credentials)?;
        let http = reqwest::Client::builder()
            .connect_timeout(settings.call_limits.connect_timeout)
            .timeout(settings.call_limits.request_timeout)
            .build()
            .map_err(|e| ApiError::other(ApiErrorKind::Dispatch, e.to_string()))?;
        let http: Arc<dyn HttpClient> = Arc::new(http);
        let mut options =
            ClientOptions::new(TransportOptions::new(http)).retry(RetryOptions::none());
        options
            .per_retry_policies_mut()
            .push(Arc::new(KeepArmErrors) as Arc<dyn Policy>);
        let scopes = vec![
            endpoint
                .join(azure_core::auth::DEFAULT_SCOPE_SUFFIX)
                .map_err(|e| ApiError::other(ApiErrorKind::Credential, e.to_string()))?
                .to_string(),
        ];
        let client = compute::Client::new(
            endpoint.clone(),
            credential.clone(),
            scopes.clone(),
            options.clone(),
        );
        let pipeline = Pipeline::new(
            option_env!("CARGO_PKG_NAME"),
            option_env!("CARGO_PKG_VERSION"),
            options,
            Vec::new(),
            Vec::new(),
        );
        Ok(Self {
            client,
            pipeline,
            credential,
            scopes,
            endpoint,
            subscription: settings.subscription_id.clone(),
            resource_group: settings.resource_group.clone(),
            limits,
        })
    }

    /// A GET of `url` with our bearer token, through the same pipeline; only to the endpoint's
    /// own origin, so the token never leaves for another host.
    async fn get_url(&self, url: &str) -> Result<(u16, Value), ApiError> {
        let url = Url::parse(url).map_err(|e| {
            ApiError::other(
                ApiErrorKind::Response,
                format!("bad operation URL {url:?}: {e}"),
            )
        })?;
        if url.origin() != self.endpoint.origin() {
            return Err(ApiError::other(
                ApiErrorKind::Response,
                format!(
                    "operation URL {} is not on the Resource Manager endpoint {}",
                    url.origin().ascii_serialization(),
                    self.endpoint.origin().ascii_serialization()
                ),
            ));
        }
        let scopes: Vec<&str> = self.scopes.iter().map(String::as_str).collect();
        let token = self
            .credential
            .get_token(&scopes)
            .await
            .map_err(api_error)?;
        let mut request = Request::new(url, Method::Get);
        request.insert_header(
            azure_core::headers::AUTHORIZATION,
            format!("Bearer {}", token.token.secret()),
        );
        let response = self
            .pipeline
            .send(&Context::default(), &mut request)
            .await
            .map_err(api_error)?;
        let status = u16::from(response.status());
        let body = response.into_body().collect().await.map_err(api_error)?;
        Ok((status, json_or_null(&body)))
    }
}

/// The credential for `source`.
pub(crate) fn credential(source: &CredentialSource) -> Result<Arc<dyn TokenCredential>, ApiError> {
    match source {
        CredentialSource::DefaultChain => azure_identity::create_default_credential()
            .map_err(|e| ApiError::other(ApiErrorKind::Credential, e.to_string())),
        CredentialSource::StaticToken(token) => Ok(Arc::new(StaticToken(token.clone()))),
    }
}

/// A fixed bearer token (local test servers).
struct StaticToken(String);

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StaticToken(..)")
    }
}

#[async_trait]
impl TokenCredential for StaticToken {
    async fn get_token(
        &self,
        _scopes: &[&str],
    ) -> azure_core::Result<azure_core::auth::AccessToken> {
        Ok(azure_core::auth::AccessToken::new(
            self.0.clone(),
            time::OffsetDateTime::now_utc() + time::Duration::hours(1),
        ))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        Ok(())
    }
}

/// A failed ARM response, as [`KeepArmErrors`] saw it.
#[derive(Debug)]
struct ArmHttpError {
    status: u16,
    code: Option<String>,
    message: String,
    retry_after: Option<Duration>,
}

impl std::fmt::Display for ArmHttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HTTP {} {}: {}",
            self.status,
            self.code.as_deref().unwrap_or("(no code)"),
            self.message
        )
    }
}

impl std::error::Error for ArmHttpError {}

/// Turns every unsuccessful response into an error that keeps ARM's code, message, status and
/// `Retry-After` (azure_core's own error drops the headers).
#[derive(Debug)]
struct KeepArmErrors;

#[async_trait]
impl Policy for KeepArmErrors {
    async fn send(
        &self,
        ctx: &Context,
        request: &mut Request,
        next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        let response = next[0].send(ctx, request, &next[1..]).await?;
        if response.status().is_success() {
            return Ok(response);
        }
        let (status, headers, body) = response.deconstruct();
        let body = body.collect().await.unwrap_or_default();
        let (code, message) = error_of(&json_or_null(&body));
        let error = ArmHttpError {
            status: u16::from(status),
            code: code.clone(),
            message: message.unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned()),
            retry_after: retry_after(&headers),
        };
        Err(azure_core::Error::new(
            ErrorKind::HttpResponse {
                status,
                error_code: code,
            },
            error,
        ))
    }
}

/// The `Retry-After` header in seconds, when present.
fn retry_after(headers: &Headers) -> Option<Duration> {
    headers
        .get_optional_str(&HeaderName::from_static("retry-after"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

fn header(headers: &Headers, name: &'static str) -> Option<String> {
    headers
        .get_optional_str(&HeaderName::from_static(name))
        .map(str::to_owned)
}

fn json_or_null(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// ARM's `{"error": {"code", "message"}}` (or the same at the top level).
fn error_of(body: &Value) -> (Option<String>, Option<String>) {
    let e = body.get("error").unwrap_or(body);
    let text = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    (text("code"), text("message"))
}

/// An SDK error as a port error.
fn api_error(e: azure_core::Error) -> ApiError {
    if let Some(h) = e.downcast_ref::<ArmHttpError>() {
        return ApiError {
            kind: ApiErrorKind::Service,
            code: h.code.clone(),
            message: h.message.clone(),
            status: Some(h.status),
            retry_after: h.retry_after,
        };
    }
    let kind = match e.kind() {
        ErrorKind::HttpResponse { status, error_code } => {
            return ApiError {
                kind: ApiErrorKind::Service,
                code: error_code.clone(),
                message: e.to_string(),
                status: Some(u16::from(*status)),
                retry_after: None,
            };
        }
        ErrorKind::Credential => ApiErrorKind::Credential,
        ErrorKind::DataConversion => ApiErrorKind::Response,
        _ => ApiErrorKind::Dispatch,
    };
    ApiError::other(kind, e.to_string())
}

/// The request JSON of a VM PUT (API 2024-07-01).
pub fn vm_body(spec: &VmSpec) -> Value {
    let image = match &spec.image {
        ImageRef::Id(id) => json!({ "id": id }),
        ImageRef::Marketplace {
            publisher,
            offer,
            sku,
            version,
        } => json!({ "publisher": publisher, "offer": offer, "sku": sku, "version": version }),
    };
    let mut os_disk = json!({
        "createOption": "FromImage",
        "deleteOption": "Delete",
        "managedDisk": { "storageAccountType": "Premium_LRS" },
    });
    if let Some(gb) = spec.os_disk_size_gb {
        os_disk["diskSizeGB"] = json!(gb);
    }
    let mut linux = json!({ "disablePasswordAuthentication": true });
    if let Some(key) = &spec.ssh_public_key {
        linux["ssh"] = json!({ "publicKeys": [{
            "path": "/home/azureuser/.ssh/authorized_keys",
            "keyData": key,
        }]});
    }
    let mut os_profile = json!({
        "computerName": spec.name,
        "adminUsername": "azureuser",
        "linuxConfiguration": linux,
    });
    if let Some(data) = &spec.custom_data {
        os_profile["customData"] = json!(data);
    }
    let mut properties = json!({
        "hardwareProfile": { "vmSize": spec.size },
        "storageProfile": { "imageReference": image, "osDisk": os_disk },
        "osProfile": os_profile,
        "networkProfile": {
            "networkApiVersion": "2020-11-01",
            "networkInterfaceConfigurations": [{
                "name": format!("{}-nic", spec.name),
                "properties": {
                    "primary": true,
                    "deleteOption": "Delete",
                    "ipConfigurations": [{
                        "name": "ipconfig1",
                        "properties": { "primary": true, "subnet": { "id": spec.subnet_id } },
                    }],
                },
            }],
        },
    });
    if spec.spot {
        properties["priority"] = json!("Spot");
        properties["evictionPolicy"] = json!("Delete");
        properties["billingProfile"] = json!({ "maxPrice": -1 });
    } else {
        properties["priority"] = json!("Regular");
    }
    if let Some(group) = &spec.capacity_reservation_group {
        properties["capacityReservation"] = json!({ "capacityReservationGroup": { "id": group } });
    }
    let mut body = json!({
        "location": spec.location,
        "tags": spec.tags,
        "properties": properties,
    });
    if let Some(zone) = &spec.zone {
        body["zones"] = json!([zone]);
    }
    if !spec.identities.is_empty() {
        let ids: BTreeMap<&str, Value> = spec
            .identities
            .iter()
            .map(|id| (id.as_str(), json!({})))
            .collect();
        body["identity"] = json!({ "type": "UserAssigned", "userAssignedIdentities": ids });
    }
    body
}

/// Tags from a resource's REST JSON (string values only).
fn tags_of(v: &Value) -> BTreeMap<String, String> {
    v.get("tags")
        .and_then(Value::as_object)
        .map(|t| {
            t.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A VM from its REST JSON.
pub fn vm_of(v: &Value) -> Vm {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let props = v.get("properties").unwrap_or(&Value::Null);
    Vm {
        id: text(v, "id").unwrap_or_default(),
        name: text(v, "name").unwrap_or_default(),
        size: props
            .get("hardwareProfile")
            .and_then(|h| text(h, "vmSize"))
            .unwrap_or_default(),
        location: text(v, "location").unwrap_or_default(),
        zone: v
            .get("zones")
            .and_then(Value::as_array)
            .and_then(|z| z.first())
            .and_then(Value::as_str)
            .map(str::to_owned),
        priority: text(props, "priority"),
        provisioning_state: text(props, "provisioningState"),
        time_created: text(props, "timeCreated")
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&chrono::Utc)),
        capacity_reservation_group: props
            .pointer("/capacityReservation/capacityReservationGroup/id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned),
        tags: tags_of(v),
    }
}

/// The capacity reservations of the group `group_id` from their REST JSON (`reservations`, as
/// listed) and the group's (`group`, read with `$expand=instanceView`). What a reservation's
/// use is comes from the group's instance view (`capacityReservations[].utilizationInfo`, by
/// reservation name): `virtualMachinesAllocated` and `currentCapacity`; a reservation the
/// instance view does not name has only its `virtualMachinesAssociated`. Entries without an
/// id, a size or a capacity are left out.
pub fn capacity_reservations_of(
    group_id: &str,
    group: &Value,
    reservations: &[Value],
) -> Vec<CapacityReservation> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let count = |v: Option<&Value>| v.and_then(Value::as_array).map_or(0, Vec::len);
    let to_u32 = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    let views: BTreeMap<String, &Value> = group
        .pointer("/properties/instanceView/capacityReservations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                text(v, "name")?.to_ascii_lowercase(),
                v.get("utilizationInfo").unwrap_or(&Value::Null),
            ))
        })
        .collect();
    reservations
        .iter()
        .filter_map(|r| {
            let props = r.get("properties").unwrap_or(&Value::Null);
            let name = text(r, "name").unwrap_or_default();
            let use_of = views.get(&name.to_ascii_lowercase());
            Some(CapacityReservation {
                id: text(r, "id").filter(|id| !id.is_empty())?,
                group_id: group_id.to_owned(),
                location: text(r, "location").unwrap_or_default(),
                zone: r
                    .get("zones")
                    .and_then(Value::as_array)
                    .and_then(|z| z.first())
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                size: r.pointer("/sku/name").and_then(Value::as_str)?.to_owned(),
                capacity: to_u32(r.pointer("/sku/capacity").and_then(Value::as_i64)?),
                current_capacity: use_of
                    .and_then(|u| u.get("currentCapacity"))
                    .and_then(Value::as_i64)
                    .map(to_u32),
                allocated: use_of.map(|u| {
                    u32::try_from(count(u.get("virtualMachinesAllocated"))).unwrap_or(u32::MAX)
                }),
                associated: u32::try_from(count(props.get("virtualMachinesAssociated")))
                    .unwrap_or(u32::MAX),
                provisioning_state: text(props, "provisioningState"),
                tags: tags_of(r),
                name,
            })
        })
        .collect()
}

/// A resource SKU from its REST JSON; `None` for anything but virtual machines.
pub fn sku_of(v: &Value) -> Option<Sku> {
    if v.get("resourceType").and_then(Value::as_str) != Some("virtualMachines") {
        return None;
    }
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let location = v
        .get("locations")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_default();
    let zones = v
        .get("locationInfo")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|i| {
            i.get("zones")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|z| z.as_str().map(str::to_owned))
        .collect();
    let capabilities = v
        .get("capabilities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some((text(c, "name")?, text(c, "value")?)))
        .collect();
    let restrictions = v
        .get("restrictions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| text(r, "reasonCode").or_else(|| text(r, "type")))
        .collect();
    Some(Sku {
        name: text(v, "name")?,
        family: text(v, "family"),
        location,
        zones,
        capabilities,
        restrictions,
    })
}

/// Where an operation is, from its GET: the `Azure-AsyncOperation` body's `status`, else the
/// `Location` protocol's 202-while-running.
pub fn operation_of(status: u16, body: &Value) -> OperationStatus {
    match body.get("status").and_then(Value::as_str) {
        Some(s) if s.eq_ignore_ascii_case("Succeeded") => OperationStatus::Succeeded,
        Some(s) if s.eq_ignore_ascii_case("Failed") || s.eq_ignore_ascii_case("Canceled") => {
            let (code, message) = error_of(body);
            OperationStatus::Failed(ApiError {
                kind: ApiErrorKind::Service,
                code: code.or_else(|| Some(s.to_owned())),
                message: message.unwrap_or_else(|| format!("the operation {s}")),
                status: None,
                retry_after: None,
            })
        }
        Some(_) => OperationStatus::InProgress { retry_after: None },
        None if status == 202 => OperationStatus::InProgress { retry_after: None },
        None => OperationStatus::Succeeded,
    }
}

impl Arm for SdkArm {
    fn get_vm(&self, name: String) -> PortFuture<'_, Option<Vm>> {
        Box::pin(async move {
            self.limits.read().await;
            let sent = self
                .client
                .virtual_machines_client()
                .get(&self.resource_group, &name, &self.subscription)
                .send()
                .await;
            let response = match sent.map_err(api_error) {
                Ok(r) => r,
                Err(e) if e.status == Some(404) => return Ok(None),
                Err(e) => return Err(e),
            };
            let body = response
                .into_raw_response()
                .into_body()
                .collect()
                .await
                .map_err(api_error)?;
            // A 200 that is not a VM (an HTML page of a proxy, a truncated body) is an error,
            // not a VM with no name in no state.
            let v: Value = serde_json::from_slice(&body).map_err(|e| {
                ApiError::other(
                    ApiErrorKind::Response,
                    format!("the VM {name} was answered with a body that is not JSON: {e}"),
                )
            })?;
            let vm = vm_of(&v);
            if vm.id.is_empty() || vm.name.is_empty() {
                return Err(ApiError::other(
                    ApiErrorKind::Response,
                    format!("the VM {name} was answered without its id or name"),
                ));
            }
            Ok(Some(vm))
        })
    }

    fn put_vm(&self, spec: VmSpec) -> PortFuture<'_, Accepted> {
        Box::pin(async move {
            let vm: models::VirtualMachine = serde_json::from_value(vm_body(&spec))
                .map_err(|e| ApiError::other(ApiErrorKind::Response, e.to_string()))?;
            self.limits.write().await;
            let response = self
                .client
                .virtual_machines_client()
                .create_or_update(&self.resource_group, &spec.name, vm, &self.subscription)
                .send()
                .await
                .map_err(api_error)?
                .into_raw_response();
            let headers = response.headers().clone();
            let operation_url =
                header(&headers, "azure-asyncoperation").or_else(|| header(&headers, "location"));
            let body = response.into_body().collect().await.map_err(api_error)?;
            Ok(Accepted {
                vm: vm_of(&json_or_null(&body)),
                operation_url,
                retry_after: retry_after(&headers),
            })
        })
    }

    fn operation(&self, url: String) -> PortFuture<'_, OperationStatus> {
        Box::pin(async move {
            self.limits.read().await;
            let (status, body) = self.get_url(&url).await?;
            Ok(operation_of(status, &body))
        })
    }

    fn delete_vm(&self, name: String) -> PortFuture<'_, ()> {
        Box::pin(async move {
            self.limits.write().await;
            match self
                .client
                .virtual_machines_client()
                .delete(&self.resource_group, &name, &self.subscription)
                .send()
                .await
                .map_err(api_error)
            {
                Ok(_) => Ok(()),
                Err(e) if e.status == Some(404) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn list_vms(&self) -> PortFuture<'_, Vec<Vm>> {
        Box::pin(async move {
            self.limits.read().await;
            let mut pages = self
                .client
                .virtual_machines_client()
                .list(&self.resource_group, &self.subscription)
                .into_stream();
            let mut vms = Vec::new();
            while let Some(page) = pages.next().await {
                let page = page.map_err(api_error)?;
                for vm in page.value {
                    let v = serde_json::to_value(&vm)
                        .map_err(|e| ApiError::other(ApiErrorKind::Response, e.to_string()))?;
                    vms.push(vm_of(&v));
                }
            }
            Ok(vms)
        })
    }

    fn resource_skus(&self, location: String) -> PortFuture<'_, Vec<Sku>> {
        Box::pin(async move {
            self.limits.read().await;
            let mut pages = self
                .client
                .resource_skus_client()
                .list(&self.subscription)
                .filter(format!("location eq '{location}'"))
                .into_stream();
            let mut skus = Vec::new();
            while let Some(page) = pages.next().await {
                let page = page.map_err(api_error)?;
                for sku in page.value {
                    let v = serde_json::to_value(&sku)
                        .map_err(|e| ApiError::other(ApiErrorKind::Response, e.to_string()))?;
                    skus.extend(sku_of(&v));
                }
            }
            Ok(skus)
        })
    }

    fn usages(&self, location: String) -> PortFuture<'_, Vec<Usage>> {
        Box::pin(async move {
            self.limits.read().await;
            let mut pages = self
                .client
                .usage_client()
                .list(&location, &self.subscription)
                .into_stream();
            let mut usages = Vec::new();
            while let Some(page) = pages.next().await {
                let page = page.map_err(api_error)?;
                usages.extend(page.value.into_iter().map(|u| Usage {
                    name: u.name.value.unwrap_or_default(),
                    current: i64::from(u.current_value),
                    limit: u.limit,
                }));
            }
            Ok(usages)
        })
    }

    fn resource_group_exists(&self) -> PortFuture<'_, bool> {
        Box::pin(async move {
            self.limits.read().await;
            let mut url = self.endpoint.clone();
            url.set_path(&format!(
                "/subscriptions/{}/resourcegroups/{}",
                self.subscription, self.resource_group
            ));
            url.query_pairs_mut()
                .append_pair("api-version", RESOURCE_GROUPS_API_VERSION);
            match self.get_url(url.as_str()).await {
                Ok(_) => Ok(true),
                Err(e) if e.status == Some(404) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn capacity_reservations(&self) -> PortFuture<'_, Vec<CapacityReservation>> {
        Box::pin(async move {
            let groups_client = self.client.capacity_reservation_groups_client();
            let reservations_client = self.client.capacity_reservations_client();
            self.limits.read().await;
            let mut pages = groups_client
                .list_by_subscription(&self.subscription)
                .into_stream();
            let mut groups = Vec::new();
            while let Some(page) = pages.next().await {
                let page = page.map_err(api_error)?;
                for group in page.value {
                    groups.push(to_json(&group)?);
                }
            }
            let mut out = Vec::new();
            for group in &groups {
                let Some((id, (subscription, resource_group, name))) = group
                    .get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| Some((id, group_parts(id)?)))
                else {
                    continue;
                };
                // A group deleted between the list and these calls is skipped (404).
                self.limits.read().await;
                let mut pages = reservations_client
                    .list_by_capacity_reservation_group(resource_group, name, subscription)
                    .into_stream();
                let mut reservations = Vec::new();
                let mut gone = false;
                while let Some(page) = pages.next().await {
                    match page.map_err(api_error) {
                        Ok(page) => {
                            for r in page.value {
                                reservations.push(to_json(&r)?);
                            }
                        }
                        Err(e) if e.status == Some(404) => {
                            gone = true;
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
                if gone || reservations.is_empty() {
                    continue;
                }
                self.limits.read().await;
                let sent = groups_client
                    .get(resource_group, name, subscription)
                    .expand("instanceView")
                    .send()
                    .await
                    .map_err(api_error);
                let response = match sent {
                    Ok(r) => r,
                    Err(e) if e.status == Some(404) => continue,
                    Err(e) => return Err(e),
                };
                let body = response
                    .into_raw_response()
                    .into_body()
                    .collect()
                    .await
                    .map_err(api_error)?;
                out.extend(capacity_reservations_of(
                    id,
                    &json_or_null(&body),
                    &reservations,
                ));
            }
            Ok(out)
        })
    }

    fn restart_vm(&self, name: String) -> PortFuture<'_, Started> {
        Box::pin(async move {
            self.limits.write().await;
            let response = self
                .client
                .virtual_machines_client()
                .restart(&self.resource_group, &name, &self.subscription)
                .send()
                .await
                .map_err(api_error)?
                .into_raw_response();
            let headers = response.headers();
            Ok(Started {
                operation_url: header(headers, "azure-asyncoperation")
                    .or_else(|| header(headers, "location")),
                retry_after: retry_after(headers),
            })
        })
    }
}

/// An SDK model as its REST JSON.
fn to_json(model: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(model).map_err(|e| ApiError::other(ApiErrorKind::Response, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VmSpec {
        VmSpec {
            name: "qm-default-abc12-0".into(),
            location: "eastus".into(),
            size: "Standard_NC24ads_A100_v4".into(),
            zone: Some("2".into()),
            spot: true,
            subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes".into(),
            image: ImageRef::Id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1.0.0".into()),
            os_disk_size_gb: Some(128),
            custom_data: Some("IyFiYXNo".into()),
            ssh_public_key: Some("ssh-ed25519 AAAA".into()),
            identities: vec!["/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kubelet".into()],
            capacity_reservation_group: None,
            tags: BTreeMap::from([("quartermaster.dev/nodeclaim".into(), "default-abc12".into())]),
        }
    }

    #[test]
    fn a_spot_vm_body_is_spot_delete_with_no_price_cap_and_fills_the_sdk_model() {
        let body = vm_body(&spec());
        assert_eq!(body["properties"]["priority"], "Spot");
        assert_eq!(body["properties"]["evictionPolicy"], "Delete");
        assert_eq!(body["properties"]["billingProfile"]["maxPrice"], -1);
        assert_eq!(body["zones"], json!(["2"]));
        assert_eq!(body["properties"]["osProfile"]["customData"], "IyFiYXNo");
        let vm: models::VirtualMachine = serde_json::from_value(body.clone()).unwrap();
        let back = serde_json::to_value(&vm).unwrap();
        assert_eq!(back["properties"]["priority"], "Spot");
        assert_eq!(back["properties"]["billingProfile"]["maxPrice"], -1.0);
        assert_eq!(
            back["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
                ["ipConfigurations"][0]["properties"]["subnet"]["id"],
            body["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
                ["ipConfigurations"][0]["properties"]["subnet"]["id"]
        );
    }

    #[test]
    fn a_vm_spec_never_prints_its_custom_data() {
        let printed = format!("{:?}", spec());
        assert!(!printed.contains("IyFiYXNo"), "{printed}");
        assert!(printed.contains("qm-default-abc12-0"));
    }

    #[test]
    fn an_on_demand_vm_is_regular() {
        let body = vm_body(&VmSpec {
            spot: false,
            zone: None,
            ..spec()
        });
        assert_eq!(body["properties"]["priority"], "Regular");
        assert!(body.get("zones").is_none());
        assert!(body["properties"].get("billingProfile").is_none());
        assert!(body["properties"].get("capacityReservation").is_none());
    }

    #[test]
    fn a_vm_in_a_capacity_reservation_group_names_it_and_reads_back_with_it() {
        let group = "/subscriptions/s/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";
        let body = vm_body(&VmSpec {
            spot: false,
            capacity_reservation_group: Some(group.into()),
            ..spec()
        });
        assert_eq!(
            body["properties"]["capacityReservation"]["capacityReservationGroup"]["id"],
            group
        );
        // The SDK model keeps it, so the PUT sends it.
        let vm: models::VirtualMachine = serde_json::from_value(body).unwrap();
        let back = serde_json::to_value(&vm).unwrap();
        assert_eq!(
            vm_of(&back).capacity_reservation_group.as_deref(),
            Some(group)
        );
        assert_eq!(
            vm_of(&json!({"properties": {}})).capacity_reservation_group,
            None
        );
    }

    #[test]
    fn capacity_reservations_read_size_zone_capacity_and_use_from_the_group_instance_view() {
        let group_id = "/subscriptions/s/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";
        let vm = |n: &str| json!({"id": format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{n}")});
        let reservation = |name: &str, zone: &str, capacity: i64, associated: Vec<Value>| {
            json!({
                "id": format!("{group_id}/capacityReservations/{name}"), "name": name,
                "location": "eastus", "zones": [zone], "tags": {"team": "research"},
                "sku": {"name": "Standard_ND96isr_H100_v5", "capacity": capacity},
                "properties": {"provisioningState": "Succeeded", "virtualMachinesAssociated": associated}
            })
        };
        let listed = [
            reservation("z1", "1", 4, vec![vm("a"), vm("b"), vm("c")]),
            reservation("z2", "2", 2, vec![vm("d")]),
            // No size: not a reservation we can use.
            json!({"id": format!("{group_id}/capacityReservations/bad"), "name": "bad", "location": "eastus", "sku": {}}),
        ];
        // The group's instance view names z1 only: two of its three associated VMs are
        // allocated (the third is deallocated), and only 3 of the 4 are held now.
        let group = json!({
            "id": group_id, "name": "h100", "location": "eastus",
            "properties": {"instanceView": {"capacityReservations": [
                {"name": "Z1", "utilizationInfo": {"currentCapacity": 3,
                 "virtualMachinesAllocated": [vm("a"), vm("b")]}}
            ]}}
        });
        let rs = capacity_reservations_of(group_id, &group, &listed);
        assert_eq!(rs.len(), 2, "{rs:?}");
        assert_eq!(rs[0].id, format!("{group_id}/capacityReservations/z1"));
        assert_eq!(rs[0].group_id, group_id);
        assert_eq!(rs[0].size, "Standard_ND96isr_H100_v5");
        assert_eq!(rs[0].zone.as_deref(), Some("1"));
        assert_eq!(rs[0].capacity, 4);
        assert_eq!(rs[0].current_capacity, Some(3));
        assert_eq!(rs[0].allocated, Some(2));
        assert_eq!(rs[0].associated, 3);
        assert_eq!(rs[0].tags["team"], "research");
        assert_eq!(rs[1].allocated, None);
        assert_eq!(rs[1].associated, 1);
        // The SDK's list model keeps what we read.
        let model: models::CapacityReservation = serde_json::from_value(listed[0].clone()).unwrap();
        let back = serde_json::to_value(&model).unwrap();
        assert_eq!(
            capacity_reservations_of(group_id, &group, &[back])[0],
            rs[0]
        );
    }

    #[test]
    fn operations_read_status_and_error() {
        assert_eq!(
            operation_of(200, &json!({"status": "InProgress"})),
            OperationStatus::InProgress { retry_after: None }
        );
        assert_eq!(
            operation_of(200, &json!({"status": "Succeeded"})),
            OperationStatus::Succeeded
        );
        match operation_of(
            200,
            &json!({"status": "Failed", "error": {"code": "AllocationFailed", "message": "no"}}),
        ) {
            OperationStatus::Failed(e) => assert_eq!(e.code.as_deref(), Some("AllocationFailed")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            operation_of(202, &Value::Null),
            OperationStatus::InProgress { retry_after: None }
        );
    }

    #[test]
    fn skus_keep_vm_sizes_with_zones_and_restrictions() {
        let v = json!({
            "resourceType": "virtualMachines", "name": "Standard_NC24ads_A100_v4",
            "family": "standardNCADSA100v4Family", "locations": ["eastus"],
            "locationInfo": [{"location": "eastus", "zones": ["2", "3"]}],
            "capabilities": [{"name": "GPUs", "value": "1"}],
            "restrictions": [{"type": "Zone", "reasonCode": "NotAvailableForSubscription"}]
        });
        let sku = sku_of(&v).unwrap();
        assert_eq!(sku.zones, vec!["2", "3"]);
        assert_eq!(sku.capabilities["GPUs"], "1");
        assert_eq!(sku.restrictions, vec!["NotAvailableForSubscription"]);
        assert!(sku_of(&json!({"resourceType": "disks", "name": "x"})).is_none());
    }
}
