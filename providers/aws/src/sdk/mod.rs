//! The port over `aws-sdk-ec2`. Everything SDK-shaped stays in this file (and `config.rs`).

mod convert;

pub(crate) use convert::api_error;
use convert::*;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types as t;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_types::error::display::DisplayErrorContext;
use chrono::{DateTime, Utc};
use quartermaster_pricing::CapacityType;

use crate::port::{
    ApiError, ApiErrorKind, Ec2, Ec2Instance, Filter, FleetError, FleetInstance, FleetRequest,
    FleetResult, Image, InstanceTypeInfo, LaunchTemplateSpec, PortFuture, SecurityGroup, Subnet,
};
use crate::rate::RateLimits;

/// EC2 through the SDK, with a rate limit per kind of call.
pub struct SdkEc2 {
    client: Client,
    limits: RateLimits,
}

impl SdkEc2 {
    /// The port over `client`.
    pub fn new(client: Client, limits: RateLimits) -> Self {
        Self { client, limits }
    }
}

impl Ec2 for SdkEc2 {
    fn describe_instances(&self, filter: Vec<Filter>) -> PortFuture<'_, Vec<Ec2Instance>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .client
                    .describe_instances()
                    .set_filters(filters(filter.clone()))
                    .set_next_token(token.take())
                    .send()
                    .await
                    .map_err(api_error)?;
                for r in page.reservations() {
                    for i in r.instances() {
                        out.push(instance(i)?);
                    }
                }
                match page.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                    _ => return Ok(out),
                }
            }
        })
    }

    fn describe_instances_by_id(&self, ids: Vec<String>) -> PortFuture<'_, Vec<Ec2Instance>> {
        Box::pin(async move {
            self.limits.read().await;
            let page = self
                .client
                .describe_instances()
                .set_instance_ids(Some(ids))
                .send()
                .await
                .map_err(api_error)?;
            page.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .map(instance)
                .collect()
        })
    }

    fn terminate_instances(&self, ids: Vec<String>) -> PortFuture<'_, ()> {
        Box::pin(async move {
            self.limits.write().await;
            self.client
                .terminate_instances()
                .set_instance_ids(Some(ids))
                .send()
                .await
                .map_err(api_error)?;
            Ok(())
        })
    }

    fn reboot_instances(&self, ids: Vec<String>) -> PortFuture<'_, ()> {
        Box::pin(async move {
            self.limits.write().await;
            self.client
                .reboot_instances()
                .set_instance_ids(Some(ids))
                .send()
                .await
                .map_err(api_error)?;
            Ok(())
        })
    }

    fn create_fleet(&self, request: FleetRequest) -> PortFuture<'_, FleetResult> {
        Box::pin(async move {
            self.limits.write().await;
            let spot = request.capacity_type == CapacityType::Spot;
            let reserved = request.capacity_type == CapacityType::Reserved;
            let configs = request
                .templates
                .iter()
                .map(|tpl| {
                    t::FleetLaunchTemplateConfigRequest::builder()
                        .launch_template_specification(
                            t::FleetLaunchTemplateSpecificationRequest::builder()
                                .launch_template_id(&tpl.launch_template_id)
                                .version("$Latest")
                                .build(),
                        )
                        .set_overrides(Some(
                            tpl.overrides
                                .iter()
                                .map(|o| {
                                    t::FleetLaunchTemplateOverridesRequest::builder()
                                        .instance_type(t::InstanceType::from(
                                            o.instance_type.as_str(),
                                        ))
                                        .subnet_id(&o.subnet_id)
                                        .priority(o.priority)
                                        .build()
                                })
                                .collect(),
                        ))
                        .build()
                })
                .collect();
            let mut call = self
                .client
                .create_fleet()
                .r#type(t::FleetType::Instant)
                .client_token(&request.client_token)
                .set_launch_template_configs(Some(configs))
                .target_capacity_specification(
                    t::TargetCapacitySpecificationRequest::builder()
                        .total_target_capacity(1)
                        .default_target_capacity_type(if spot {
                            t::DefaultTargetCapacityType::Spot
                        } else if reserved && request.capacity_block {
                            t::DefaultTargetCapacityType::CapacityBlock
                        } else {
                            t::DefaultTargetCapacityType::OnDemand
                        })
                        .build(),
                )
                .tag_specifications(
                    t::TagSpecification::builder()
                        .resource_type(t::ResourceType::Instance)
                        .set_tags(Some(sdk_tags(&request.tags)))
                        .build(),
                )
                .set_context(request.context.clone());
            call = if spot {
                call.spot_options(
                    t::SpotOptionsRequest::builder()
                        .allocation_strategy(t::SpotAllocationStrategy::PriceCapacityOptimized)
                        .build(),
                )
            } else if reserved && !request.capacity_block {
                // An ODCR: the template targets it; the fleet uses reservations first.
                call.on_demand_options(
                    t::OnDemandOptionsRequest::builder()
                        .allocation_strategy(t::FleetOnDemandAllocationStrategy::LowestPrice)
                        .capacity_reservation_options(
                            t::CapacityReservationOptionsRequest::builder()
                                .usage_strategy(
                                    t::FleetCapacityReservationUsageStrategy::UseCapacityReservationsFirst,
                                )
                                .build(),
                        )
                        .build(),
                )
            } else if reserved {
                call
            } else {
                call.on_demand_options(
                    t::OnDemandOptionsRequest::builder()
                        .allocation_strategy(t::FleetOnDemandAllocationStrategy::LowestPrice)
                        .build(),
                )
            };
            // Capacity errors come back as HTTP 500s, which the SDK's standard policy retries:
            // a launch is tried once; the engine decides what comes next.
            let out = call
                .customize()
                .config_override(
                    aws_sdk_ec2::config::Builder::default().retry_config(RetryConfig::disabled()),
                )
                .send()
                .await
                .map_err(api_error)?;
            let overrides = |lt: Option<&t::LaunchTemplateAndOverridesResponse>| {
                lt.and_then(|l| l.overrides()).map(|o| {
                    (
                        o.instance_type().map(|t| t.as_str().to_owned()),
                        o.subnet_id().map(str::to_owned),
                        o.availability_zone().map(str::to_owned),
                    )
                })
            };
            let mut result = FleetResult::default();
            for i in out.instances() {
                let (instance_type, subnet_id, zone) =
                    overrides(i.launch_template_and_overrides()).unwrap_or_default();
                for id in i.instance_ids() {
                    result.instances.push(FleetInstance {
                        id: id.clone(),
                        instance_type: i
                            .instance_type()
                            .map(|t| t.as_str().to_owned())
                            .or_else(|| instance_type.clone()),
                        subnet_id: subnet_id.clone(),
                        zone: zone.clone(),
                        capacity_type: capacity_of(i.lifecycle()),
                    });
                }
            }
            for e in out.errors() {
                let (instance_type, subnet_id, zone) =
                    overrides(e.launch_template_and_overrides()).unwrap_or_default();
                result.errors.push(FleetError {
                    code: e.error_code().unwrap_or("Unknown").to_owned(),
                    message: e.error_message().unwrap_or_default().to_owned(),
                    instance_type,
                    subnet_id,
                    zone,
                });
            }
            Ok(result)
        })
    }

    fn describe_capacity_reservations(
        &self,
    ) -> PortFuture<'_, Vec<quartermaster_pricing::Reservation>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .client
                    .describe_capacity_reservations()
                    .set_filters(filters(vec![Filter {
                        name: "state".into(),
                        values: vec!["active".into(), "scheduled".into()],
                    }]))
                    .set_next_token(token.take())
                    .send()
                    .await
                    .map_err(api_error)?;
                for r in page.capacity_reservations() {
                    let (Some(id), Some(instance_type), Some(zone)) = (
                        r.capacity_reservation_id(),
                        r.instance_type(),
                        r.availability_zone(),
                    ) else {
                        continue;
                    };
                    out.push(quartermaster_pricing::Reservation {
                        id: id.to_owned(),
                        cloud: quartermaster_pricing::Cloud::Aws,
                        instance_type: instance_type.to_owned(),
                        zone: zone.to_owned(),
                        count: r
                            .total_instance_count()
                            .and_then(|n| u32::try_from(n).ok())
                            .unwrap_or(0),
                        available: r
                            .available_instance_count()
                            .and_then(|n| u32::try_from(n).ok()),
                        kind: match r.reservation_type() {
                            Some(t::CapacityReservationType::CapacityBlock) => {
                                quartermaster_pricing::ReservationKind::CapacityBlock
                            }
                            _ => quartermaster_pricing::ReservationKind::Default,
                        },
                        // EC2 does not say; what a reservation costs is the bill's business.
                        price_per_hour: 0.0,
                        start: r.start_date().and_then(chrono_time),
                        end: r.end_date().and_then(chrono_time),
                        tags: tags_of(r.tags()),
                    });
                }
                match page.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                    _ => break,
                }
            }
            Ok(out)
        })
    }

    fn find_launch_template(&self, name: String) -> PortFuture<'_, Option<String>> {
        Box::pin(async move {
            self.limits.read().await;
            let out = self
                .client
                .describe_launch_templates()
                .launch_template_names(name)
                .send()
                .await;
            match out {
                Ok(out) => Ok(out
                    .launch_templates()
                    .iter()
                    .find_map(|t| t.launch_template_id().map(str::to_owned))),
                Err(e) => {
                    let e = api_error(e);
                    if e.code.as_deref().is_some_and(|c| c.contains("NotFound")) {
                        Ok(None)
                    } else {
                        Err(e)
                    }
                }
            }
        })
    }

    fn create_launch_template(&self, spec: LaunchTemplateSpec) -> PortFuture<'_, String> {
        Box::pin(async move {
            self.limits.write().await;
            let data = t::RequestLaunchTemplateData::builder()
                .image_id(&spec.image_id)
                .user_data(&spec.user_data)
                .set_iam_instance_profile(spec.instance_profile.as_ref().map(|p| {
                    t::LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                        .name(p)
                        .build()
                }))
                .set_security_group_ids(Some(spec.security_group_ids.clone()))
                .metadata_options(
                    t::LaunchTemplateInstanceMetadataOptionsRequest::builder()
                        .http_tokens(t::LaunchTemplateHttpTokensState::from(
                            spec.http_tokens.as_str(),
                        ))
                        .http_put_response_hop_limit(spec.http_put_response_hop_limit)
                        .http_endpoint(t::LaunchTemplateInstanceMetadataEndpointState::from(
                            spec.http_endpoint.as_str(),
                        ))
                        .build(),
                )
                .monitoring(
                    t::LaunchTemplatesMonitoringRequest::builder()
                        .enabled(spec.monitoring)
                        .build(),
                )
                .set_capacity_reservation_specification(spec.capacity_reservation.as_ref().map(
                    |r| {
                        t::LaunchTemplateCapacityReservationSpecificationRequest::builder()
                            .capacity_reservation_target(
                                t::CapacityReservationTarget::builder()
                                    .capacity_reservation_id(&r.id)
                                    .build(),
                            )
                            .build()
                    },
                ))
                .set_instance_market_options(
                    spec.capacity_reservation
                        .as_ref()
                        .filter(|r| r.capacity_block)
                        .map(|_| {
                            t::LaunchTemplateInstanceMarketOptionsRequest::builder()
                                .market_type(t::MarketType::CapacityBlock)
                                .build()
                        }),
                )
                .set_block_device_mappings(Some(
                    spec.block_devices
                        .iter()
                        .map(|b| {
                            t::LaunchTemplateBlockDeviceMappingRequest::builder()
                                .device_name(&b.device_name)
                                .ebs(
                                    t::LaunchTemplateEbsBlockDeviceRequest::builder()
                                        .set_volume_size(b.volume_size_gib)
                                        .set_volume_type(
                                            b.volume_type.as_deref().map(t::VolumeType::from),
                                        )
                                        .set_iops(b.iops)
                                        .set_throughput(b.throughput)
                                        .set_encrypted(b.encrypted)
                                        .set_delete_on_termination(b.delete_on_termination)
                                        .set_kms_key_id(b.kms_key_id.clone())
                                        .set_snapshot_id(b.snapshot_id.clone())
                                        .build(),
                                )
                                .build()
                        })
                        .collect(),
                ))
                .build();
            let out = self
                .client
                .create_launch_template()
                .launch_template_name(&spec.name)
                .launch_template_data(data)
                .tag_specifications(
                    t::TagSpecification::builder()
                        .resource_type(t::ResourceType::LaunchTemplate)
                        .set_tags(Some(sdk_tags(&spec.tags)))
                        .build(),
                )
                .send()
                .await
                .map_err(api_error)?;
            out.launch_template()
                .and_then(|t| t.launch_template_id())
                .map(str::to_owned)
                .ok_or_else(|| ApiError {
                    kind: ApiErrorKind::Response,
                    code: None,
                    message: format!("CreateLaunchTemplate {} returned no id", spec.name),
                    status: None,
                    retry_after: None,
                })
        })
    }

    fn describe_subnets(
        &self,
        ids: Vec<String>,
        filter: Vec<Filter>,
    ) -> PortFuture<'_, Vec<Subnet>> {
        Box::pin(async move {
            self.limits.read().await;
            let out = self
                .client
                .describe_subnets()
                .set_subnet_ids((!ids.is_empty()).then_some(ids))
                .set_filters(filters(filter))
                .send()
                .await
                .map_err(api_error)?;
            Ok(out
                .subnets()
                .iter()
                .filter_map(|s| {
                    Some(Subnet {
                        id: s.subnet_id()?.to_owned(),
                        zone: s.availability_zone()?.to_owned(),
                        available_ips: s.available_ip_address_count().unwrap_or(0).into(),
                    })
                })
                .collect())
        })
    }

    fn describe_security_groups(
        &self,
        ids: Vec<String>,
        filter: Vec<Filter>,
    ) -> PortFuture<'_, Vec<SecurityGroup>> {
        Box::pin(async move {
            self.limits.read().await;
            let out = self
                .client
                .describe_security_groups()
                .set_group_ids((!ids.is_empty()).then_some(ids))
                .set_filters(filters(filter))
                .send()
                .await
                .map_err(api_error)?;
            Ok(out
                .security_groups()
                .iter()
                .filter_map(|g| {
                    Some(SecurityGroup {
                        id: g.group_id()?.to_owned(),
                        name: g.group_name().unwrap_or_default().to_owned(),
                    })
                })
                .collect())
        })
    }

    fn describe_images(
        &self,
        ids: Vec<String>,
        owners: Vec<String>,
        filter: Vec<Filter>,
    ) -> PortFuture<'_, Vec<Image>> {
        Box::pin(async move {
            self.limits.read().await;
            let out = self
                .client
                .describe_images()
                .set_image_ids((!ids.is_empty()).then_some(ids))
                .set_owners((!owners.is_empty()).then_some(owners))
                .set_filters(filters(filter))
                .send()
                .await
                .map_err(api_error)?;
            Ok(out
                .images()
                .iter()
                .filter_map(|i| {
                    Some(Image {
                        id: i.image_id()?.to_owned(),
                        name: i.name().unwrap_or_default().to_owned(),
                        architecture: i
                            .architecture()
                            .map(|a| a.as_str().to_owned())
                            .unwrap_or_default(),
                        creation_date: i.creation_date().unwrap_or_default().to_owned(),
                    })
                })
                .collect())
        })
    }

    fn describe_instance_types(&self) -> PortFuture<'_, Vec<InstanceTypeInfo>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .client
                    .describe_instance_types()
                    .set_next_token(token.take())
                    .send()
                    .await
                    .map_err(api_error)?;
                for i in page.instance_types() {
                    let Some(name) = i.instance_type() else {
                        continue;
                    };
                    out.push(InstanceTypeInfo {
                        name: name.as_str().to_owned(),
                        vcpus: i
                            .v_cpu_info()
                            .and_then(|v| v.default_v_cpus())
                            .unwrap_or(0)
                            .try_into()
                            .unwrap_or(0),
                        memory_mib: i
                            .memory_info()
                            .and_then(|m| m.size_in_mib())
                            .unwrap_or(0)
                            .try_into()
                            .unwrap_or(0),
                        architectures: i
                            .processor_info()
                            .map(|p| {
                                p.supported_architectures()
                                    .iter()
                                    .map(|a| a.as_str().to_owned())
                                    .collect()
                            })
                            .unwrap_or_default(),
                        gpus: i
                            .gpu_info()
                            .map(|g| {
                                g.gpus()
                                    .iter()
                                    .map(|d| {
                                        (
                                            d.manufacturer().unwrap_or_default().to_owned(),
                                            d.name().unwrap_or_default().to_owned(),
                                            d.count().unwrap_or(0).try_into().unwrap_or(0),
                                            d.memory_info()
                                                .and_then(|m| m.size_in_mib())
                                                .unwrap_or(0)
                                                .try_into()
                                                .unwrap_or(0),
                                        )
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        efa_count: i
                            .network_info()
                            .and_then(|n| n.efa_info())
                            .and_then(|e| e.maximum_efa_interfaces())
                            .unwrap_or(0)
                            .try_into()
                            .unwrap_or(0),
                    });
                }
                match page.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                    _ => return Ok(out),
                }
            }
        })
    }

    fn describe_instance_type_offerings(&self) -> PortFuture<'_, Vec<(String, String)>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .client
                    .describe_instance_type_offerings()
                    .location_type(t::LocationType::AvailabilityZone)
                    .set_next_token(token.take())
                    .send()
                    .await
                    .map_err(api_error)?;
                for o in page.instance_type_offerings() {
                    if let (Some(ty), Some(zone)) = (o.instance_type(), o.location()) {
                        out.push((ty.as_str().to_owned(), zone.to_owned()));
                    }
                }
                match page.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                    _ => return Ok(out),
                }
            }
        })
    }
}
