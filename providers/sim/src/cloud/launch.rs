//! Launches: capacity, limits and refusals read at the moment of a create, reserved and flex-start launches.

use super::*;

impl SimCloud {
    pub(super) fn create_now(&self, request: &LaunchRequest) -> Result<Instance, CloudError> {
        let (mut st, now) = self.state_now();
        self.throttle(&mut st)?;
        if let Some(&i) = st.by_claim.get(&request.claim_name)
            && st.instances[i].timeline.is_live(now)
        {
            st.stats.idempotent_creates += 1;
            return Ok(st.instances[i].view(now));
        }
        let invalid = |message: String| CloudError::InvalidRequest { message };
        let Some(ty) = self.catalog.get(self.cloud, &request.instance_type) else {
            st.stats.invalid_requests += 1;
            return Err(invalid(format!(
                "unknown {} instance type {:?}",
                self.cloud, request.instance_type
            )));
        };
        let reserved = if request.capacity_type == CapacityType::Reserved {
            match self.reservation_for(&st, request, ty, now) {
                Ok(r) => Some(r),
                Err(e) => {
                    match &e {
                        CloudError::InsufficientCapacity { .. } => st.stats.capacity_errors += 1,
                        _ => st.stats.invalid_requests += 1,
                    }
                    return Err(e);
                }
            }
        } else {
            None
        };
        let found = match &reserved {
            Some((_, o, _)) => Some(o),
            None => ty
                .offerings
                .iter()
                .find(|o| o.zone == request.zone && o.capacity_type == request.capacity_type),
        };
        let Some(offering) = found else {
            st.stats.invalid_requests += 1;
            return Err(invalid(format!(
                "{} is not offered as {} in {}",
                ty.name, request.capacity_type, request.zone
            )));
        };
        let refusal = if reserved.is_some() {
            // A free slot of an active reservation is there to be had.
            None
        } else if offering.available {
            self.refusal(&st, ty, &offering.zone, offering.capacity_type, now)
                .or_else(|| self.flex_start_unfulfilled(ty, offering.capacity_type))
        } else {
            Some("offering marked unavailable in the catalog".to_owned())
        };
        if let Some(why) = refusal {
            st.stats.capacity_errors += 1;
            offering_entry(
                &mut st.offerings,
                &ty.name,
                &offering.zone,
                offering.capacity_type,
            )
            .capacity_errors += 1;
            return Err(CloudError::InsufficientCapacity {
                instance_type: ty.name.clone(),
                zone: offering.zone.clone(),
                capacity_type: offering.capacity_type,
                message: self.capacity_message(&ty.name, &offering.zone, &why),
            });
        }

        let seq = st.instances.len();
        let mut instance = self.launch(seq, now, ty, offering, request);
        if st.interruptions_held {
            instance.timeline.call_off_notice(now);
        }
        if let Some((index, _, reclaim_at)) = &reserved {
            instance.reservation = Some(*index);
            instance.timeline.reclaim_at = match (instance.timeline.reclaim_at, reclaim_at) {
                (Some(a), Some(b)) => Some(a.min(*b)),
                (a, b) => a.or(*b),
            };
        }
        let view = instance.view(now);
        for &l in &instance.limits {
            st.limit_live[l] += 1;
        }
        for (at, kind) in instance.timeline.moments() {
            st.schedule.push((at, seq, kind));
        }
        st.by_claim.insert(request.claim_name.clone(), seq);
        st.by_id.insert(instance.provider_id.clone(), seq);
        st.instances.push(instance);
        st.stats.launches += 1;
        st.stats.live += 1;
        if offering.capacity_type == CapacityType::FlexStart {
            st.stats.flex_start_launches += 1;
        }
        if st.instances[seq].timeline.registered_at > after(now, NEVER / 2) {
            st.stats.never_registered += 1;
        }
        let o = st.offering(seq);
        o.launches += 1;
        o.live += 1;
        self.lose_response(&mut st)?;
        Ok(view)
    }

    /// The reservation a `reserved` launch goes into (the request's
    /// `quartermaster.dev/capacity-reservation-id` label, else the first of its type and zone),
    /// with the offering it launches as (priced 0: the reservation is paid whether used or not)
    /// and when the cloud reclaims its instances; an error when it is unknown, not active or
    /// full (EC2's `ReservationCapacityExceeded`).
    pub(super) fn reservation_for(
        &self,
        st: &State,
        request: &LaunchRequest,
        ty: &InstanceType,
        now: DateTime<Utc>,
    ) -> Result<(usize, Offering, Option<DateTime<Utc>>), CloudError> {
        let named = request
            .labels
            .get(quartermaster_pricing::reservation::LABEL_RESERVATION_ID);
        let index = self
            .config
            .reservations
            .iter()
            .position(|r| match named {
                Some(id) => r.id == *id,
                None => r.instance_type == ty.name && r.zone == request.zone,
            })
            .ok_or_else(|| CloudError::InvalidRequest {
                message: format!(
                    "no capacity reservation {} for {} in {}",
                    named.map_or("", String::as_str),
                    ty.name,
                    request.zone
                ),
            })?;
        let config = &self.config.reservations[index];
        let r = config.reservation(self.cloud, self.start);
        let full = |why: String| CloudError::InsufficientCapacity {
            instance_type: ty.name.clone(),
            zone: request.zone.clone(),
            capacity_type: CapacityType::Reserved,
            message: format!("ReservationCapacityExceeded: {why}"),
        };
        if r.instance_type != ty.name || r.zone != request.zone {
            return Err(CloudError::InvalidRequest {
                message: format!(
                    "capacity reservation {} holds {} in {}, not {} in {}",
                    r.id, r.instance_type, r.zone, ty.name, request.zone
                ),
            });
        }
        let active = r.start.is_none_or(|s| now >= s) && r.reclaim_at().is_none_or(|e| now < e);
        if !active {
            return Err(full(format!("capacity reservation {} is not active", r.id)));
        }
        let live = st
            .instances
            .iter()
            .filter(|i| i.reservation == Some(index) && i.timeline.is_live(now))
            .count();
        if live >= r.count as usize {
            return Err(full(format!(
                "all {} instances of capacity reservation {} are in use",
                r.count, r.id
            )));
        }
        let Some(template) = ty.offerings.iter().find(|o| o.zone == request.zone) else {
            return Err(CloudError::InvalidRequest {
                message: format!("{} is not offered in {}", ty.name, request.zone),
            });
        };
        let mut offering = template.clone();
        offering.capacity_type = CapacityType::Reserved;
        offering.price_per_hour = 0.0;
        offering.available = true;
        Ok((index, offering, r.reclaim_at()))
    }

    /// Every reservation of the account, with times.
    pub fn reservations(&self) -> Vec<quartermaster_pricing::Reservation> {
        self.config
            .reservations
            .iter()
            .map(|r| r.reservation(self.cloud, self.start))
            .collect()
    }

    /// The `seq`-th instance, launched at `now`: its whole life is decided here, from its own
    /// random stream.
    pub(super) fn launch(
        &self,
        seq: usize,
        now: DateTime<Utc>,
        ty: &InstanceType,
        offering: &Offering,
        request: &LaunchRequest,
    ) -> SimInstance {
        let config = &self.config;
        let mut draws = rng::stream(self.seed, seq as u64 + 1);
        let provider_id = format!("sim:///{}/i-0{:016x}", offering.zone, draws.next_u64());
        let never_ready = rng::chance(&mut draws, config.accelerators_never_ready);
        let interruption_hours =
            rng::exponential(&mut draws, config.interruptions.spot_rate_per_hour);
        // Drawn only when asked for, so runs without it keep their random stream.
        let never_registers = config.nodes_never_register > 0.0
            && rng::chance(&mut draws, config.nodes_never_register);
        let gpu_fault_hours = if config.gpu_faults_per_hour > 0.0 {
            rng::exponential(&mut draws, config.gpu_faults_per_hour)
        } else {
            None
        };
        // Drawn only when asked for, so runs without it keep their random stream.
        let gpu_fault_resettable = gpu_fault_hours.is_some()
            && config.gpu_faults_resettable > 0.0
            && rng::chance(&mut draws, config.gpu_faults_resettable);

        let accelerator = ty
            .accelerator
            .as_ref()
            .filter(|a| a.count > 0 && !a.is_fractional())
            .map(|a| a.resource.as_str());
        // A flex-start request first waits in the queue for its VM (never beyond the longest
        // wait: such a launch is refused before it gets here).
        let queued = if offering.capacity_type == CapacityType::FlexStart {
            config.flex_start.wait.for_family(&ty.family)
        } else {
            Duration::ZERO
        };
        let running_at = after(
            after(now, queued),
            config.launch_latency.for_family(&ty.family),
        );
        let registered_at = if never_registers {
            after(running_at, NEVER)
        } else {
            after(running_at, config.registration_delay.for_family(&ty.family))
        };
        let accelerators_at = match accelerator {
            None => Some(registered_at),
            Some(_) if never_ready => None,
            Some(_) => Some(after(
                registered_at,
                config.device_plugin_delay.for_family(&ty.family),
            )),
        };
        let notice_at = interruption_hours
            .filter(|_| offering.capacity_type == CapacityType::Spot)
            .map(|h| {
                let lifetime = Duration::try_from_secs_f64(h * 3600.0).unwrap_or(Duration::MAX);
                after(running_at, lifetime)
            });
        let reclaim_at = notice_at.map(|n| after(n, config.interruptions.notice_for(self.cloud)));
        // Compute Engine deletes a flex-start VM at the end of its maximum run, counted from
        // when it runs.
        let reclaim_at = reclaim_at.or_else(|| {
            (offering.capacity_type == CapacityType::FlexStart).then(|| {
                after(
                    running_at,
                    FLEX_START_MAX_RUN.to_std().unwrap_or(Duration::MAX),
                )
            })
        });

        let name = node_name(
            self.cloud,
            &offering.region,
            &request.claim_name,
            seq as u64,
        );
        let mut labels = ty.offering_labels(offering);
        labels.extend(request.labels.clone());
        labels.insert(HOSTNAME_LABEL.to_owned(), name.clone());
        let full_allocatable = ty.allocatable();
        let mut capacity = ty.capacity();
        let mut allocatable = full_allocatable.clone();
        if let Some(resource) = accelerator {
            capacity.remove(resource);
            allocatable.remove(resource);
        }
        let limits = config
            .capacity
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                l.selector()
                    .matches(&ty.name, &ty.family, &offering.zone, offering.capacity_type)
            })
            .map(|(i, _)| i)
            .collect();

        SimInstance {
            provider_id,
            claim_name: request.claim_name.clone(),
            instance_type: ty.name.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type,
            price_per_hour: offering.price_per_hour,
            tags: request.tags.clone(),
            node: SimNode {
                name,
                labels,
                capacity,
                allocatable,
            },
            full_allocatable,
            timeline: Timeline {
                launched_at: now,
                billed_from: after(now, queued),
                running_at,
                registered_at,
                accelerators_at,
                gpu_fault_at: gpu_fault_hours
                    .filter(|_| accelerator.is_some())
                    .zip(accelerators_at)
                    .map(|(h, up)| {
                        let after_up =
                            Duration::try_from_secs_f64(h * 3600.0).unwrap_or(Duration::MAX);
                        after(up, after_up)
                    }),
                gpu_fault_resettable,
                notice_at,
                reclaim_at,
                deleted_at: None,
            },
            limits,
            reservation: None,
        }
    }
}
