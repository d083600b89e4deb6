//! The [`Arm`] port over `azure_mgmt_compute` (API version 2024-07-01): VM PUT and restart
//! with `.send()` only (the crate's long-running-operation future re-sends the PUT in a loop, so
//! operations are followed here through their `Azure-AsyncOperation` URL), GET, DELETE, list,
//! resource SKUs, and capacity reservation groups with their reservations. The pipeline never retries (the engine decides) and a small policy of ours keeps the
//! ARM error code, status and `Retry-After` of every failed response.
//!
//! Requests are built from, and responses read as, the REST JSON shapes: the crate's models are
//! filled from JSON, so what we send is exactly what ARM documents.

mod http;
mod json;

use http::*;
pub use json::*;

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

#[cfg(test)]
mod tests;
