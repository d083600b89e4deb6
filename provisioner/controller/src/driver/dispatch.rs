//! Act: each engine action handed to a task (launch, delete, nominate, cordon, reboot), the
//! announcements of a pass (unschedulable pods, initialized claims), terminations started.

use std::time::Instant;

use chrono::{DateTime, Utc};
use quartermaster_engine::{Action, ClaimView, Event};
use quartermaster_solver::PodRef;
use tracing::Instrument as _;

use super::{Driver, EXPLAINED_PER_PASS, Outcome, TOP_REASONS};
use crate::launch::launch;
use crate::lifecycle;
use crate::metrics::{DisruptionLabels, PoolLabels, TerminationLabels};
use crate::termination::terminate;
use crate::translate::FINALIZER;

impl Driver {
    pub(super) fn dispatch(&mut self, now: DateTime<Utc>, action: Action) {
        match action {
            Action::Launch { claim, request } => {
                if !self.launching.insert(claim.clone()) {
                    return;
                }
                let cloud = self
                    .engine
                    .as_ref()
                    .and_then(|e| e.claim(&claim))
                    .map(|c| c.cloud);
                let Some(cloud) = cloud else {
                    self.launching.remove(&claim);
                    return;
                };
                let pool = self.ctx.stores.node_pool(request.node_pool.as_str());
                // The launch's span names the claim and the pods it is for: every line of the
                // launch task (the API writes, the cloud's calls) carries them.
                let span = tracing::info_span!(
                    "launch",
                    nodeclaim = %claim,
                    nodepool = %request.node_pool,
                    pods = %PodList(
                        self.engine
                            .as_ref()
                            .map(|e| e.nominated_to(&claim).cloned().collect())
                            .unwrap_or_default()
                    ),
                );
                span.in_scope(|| {
                    tracing::info!(
                        instance_type = %request.instance_type,
                        zone = %request.zone,
                        capacity_type = %request.capacity_type,
                        "launch decided"
                    )
                });
                if !self.seen.contains(&claim) && !self.written.created(&claim) {
                    self.ctx
                        .metrics
                        .nodeclaims_created
                        .get_or_create(&PoolLabels {
                            nodepool: request.node_pool.clone(),
                        })
                        .inc();
                    self.written.mark_created(&claim);
                    lifecycle::nominated_events(self, &claim);
                    crate::page::record_decision(
                        &self.ctx,
                        now,
                        crate::page::Decision::launch(&request),
                    );
                }
                self.ctx.spawn(
                    launch(
                        self.ctx.clone(),
                        cloud,
                        request,
                        pool,
                        self.outcomes_tx.clone(),
                        Instant::now(),
                    )
                    .instrument(span),
                );
            }
            Action::Delete {
                claim,
                provider_id,
                reason,
            } => {
                let view = self.engine.as_ref().and_then(|e| e.claim(&claim));
                let pool = view
                    .as_ref()
                    .map(|v| v.node_pool.clone())
                    .unwrap_or_default();
                self.ctx
                    .metrics
                    .nodeclaims_terminated
                    .get_or_create(&TerminationLabels {
                        nodepool: pool,
                        reason: reason.to_string(),
                    })
                    .inc();
                if reason == quartermaster_engine::DeleteReason::Underutilized
                    && let Some(v) = &view
                {
                    self.ctx
                        .metrics
                        .consolidation_savings
                        .inc_by(v.offering.price_per_hour);
                }
                lifecycle::disrupting_event(self, &claim, reason, view.as_ref());
                crate::page::record_decision(
                    &self.ctx,
                    now,
                    crate::page::Decision::delete(&claim, reason, view.as_ref()),
                );
                let ctx = self.ctx.clone();
                let tx = self.outcomes_tx.clone();
                // A claim whose launch task created (or is creating) its NodeClaim is in the
                // cluster even before the store shows it: deleting only the instance would leave
                // the NodeClaim, and the instance a launch still running may create, behind.
                let in_cluster = self.seen.contains(&claim)
                    || self.written.created(&claim)
                    || self.launching.contains(&claim);
                let span = tracing::info_span!("delete", nodeclaim = %claim, %reason);
                self.ctx.spawn(async move {
                    if in_cluster {
                        if let Err(e) = ctx.writer.delete_claim(&claim).await {
                            tracing::warn!(nodeclaim = %claim, error = %e, "delete failed; retried on the next pass");
                        }
                        return;
                    }
                    // Never recorded in the cluster: delete the instance directly.
                    if let (Some(id), Some(provider)) = (
                        provider_id,
                        view.and_then(|v| ctx.provider(v.cloud).cloned()),
                    ) {
                        let _ = provider.delete(&id).await;
                    }
                    let _ = tx.send(Outcome::Engine(Box::new(Event::Deleted { claim })));
                }.instrument(span));
            }
            // The kube-scheduler binds pods: it is told where they are expected, no more.
            Action::Bind { pod, node } => self.nominate_pod(pod, node),
            Action::Cordon { node } => lifecycle::cordon(&self.ctx, node, true),
            Action::Uncordon { node } => lifecycle::cordon(&self.ctx, node, false),
            Action::SoftCordon { node, on } => lifecycle::soft_cordon(&self.ctx, node, on),
            // Pods leave a node through its NodeClaim's termination (evictions honour PDBs).
            Action::Drain { .. } => {}
            Action::Reboot {
                claim,
                provider_id,
                reason,
            } => {
                lifecycle::rebooting_event(self, &claim, &reason);
                let provider = self
                    .engine
                    .as_ref()
                    .and_then(|e| e.claim(&claim))
                    .and_then(|v| self.ctx.provider(v.cloud).cloned());
                let tx = self.outcomes_tx.clone();
                self.ctx.spawn(async move {
                    let result = match provider {
                        Some(p) => crate::repair::reboot(p.as_ref(), &provider_id).await,
                        None => Err(format!("no cloud provider for {provider_id}")),
                    };
                    if let Err(error) = result {
                        tracing::warn!(nodeclaim = %claim, %error, "reboot failed; replacing the node");
                        let _ = tx.send(Outcome::Engine(Box::new(Event::RebootFailed { claim, error })));
                    }
                });
            }
            Action::Disrupt(command) => {
                tracing::info!(
                    kind = %command.kind,
                    reason = %command.reason,
                    saving_per_hour = command.saving_per_hour,
                    nodeclaims = ?command.claims,
                    replacements = ?command.replacements,
                    pods = command.pods,
                    "disruption decided"
                );
                let labels = DisruptionLabels {
                    kind: command.kind.to_string(),
                    reason: command.reason.to_string(),
                };
                self.ctx
                    .metrics
                    .disruption_commands
                    .get_or_create(&labels)
                    .inc();
                self.ctx
                    .metrics
                    .disruption_expected_savings
                    .get_or_create(&labels)
                    .inc_by(command.saving_per_hour);
                crate::page::record_decision(
                    &self.ctx,
                    now,
                    crate::page::Decision::disrupt(&command),
                );
            }
        }
    }

    /// Writes `status.nominatedNodeName` of a pod that is still pending (once per node) with
    /// `--nominate-pods=All`: a hint the kube-scheduler honours from Kubernetes 1.34 (KEP-5278)
    /// by keeping the node's room for it. Nothing depends on it: the engine checks what was
    /// really bound. By default (`NewNodes`) only registration writes it (`feed.rs`).
    fn nominate_pod(&mut self, pod: PodRef, node: String) {
        if self.ctx.nominate_pods != crate::context::NominatePods::All
            || self.reported.get(&pod) != Some(&None)
            || self.nominations_written.get(&pod) == Some(&node)
        {
            return;
        }
        self.nominations_written.insert(pod.clone(), node.clone());
        let ctx = self.ctx.clone();
        self.ctx.spawn(async move {
            if let Err(e) = ctx
                .writer
                .nominate_pod(&pod.namespace, &pod.name, &node)
                .await
            {
                tracing::debug!(%pod, node, error = %e, "could not write nominatedNodeName");
            }
        });
    }

    /// Unschedulable events for pods the solver could not place, and Initialized events.
    pub(super) fn announce(&mut self, now: DateTime<Utc>) {
        let Some(engine) = &self.engine else {
            return;
        };
        let waiting: Vec<(PodRef, String)> = engine
            .waiting()
            .filter_map(|(id, r)| Some((id.clone(), r?.to_owned())))
            // A ProvisioningRequest's pods do not exist: its conditions carry the reason.
            .filter(|(id, _)| {
                !self
                    .requests
                    .observed
                    .iter()
                    .any(|r| r.pending.contains(id))
            })
            .collect();
        // Each explanation is a solve: only the first few new reasons of a pass get one.
        let mut explained = 0;
        for (id, reason) in waiting {
            if self.unschedulable.get(&id) == Some(&reason) {
                continue;
            }
            let top = (explained < EXPLAINED_PER_PASS)
                .then(|| engine.explain(now, &id))
                .flatten()
                .map(|e| quartermaster_solver::explain::top_reasons(&e, TOP_REASONS))
                .filter(|t| !t.is_empty());
            explained += 1;
            let message = match top {
                Some(top) => format!("{reason} (offerings ruled out: {top})"),
                None => reason.clone(),
            };
            lifecycle::unschedulable_event(&self.ctx, &id, &message);
            self.unschedulable.insert(id, reason);
        }
        let newly: Vec<ClaimView> = engine
            .claims()
            .filter(|c| c.initialized && !self.initialized.contains(&c.name))
            .collect();
        for c in newly {
            self.initialized.insert(c.name.clone());
            lifecycle::initialized_event(&self.ctx, &c);
        }
    }

    pub(super) fn terminations(&mut self) {
        for claim in self.ctx.stores.node_claims.state() {
            let Some(name) = claim.metadata.name.clone() else {
                continue;
            };
            let ours = claim
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER);
            if claim.metadata.deletion_timestamp.is_none()
                || !ours
                || self.launching.contains(&name)
                || !self.terminating.insert(name.clone())
            {
                continue;
            }
            let ctx = self.ctx.clone();
            let tx = self.outcomes_tx.clone();
            self.ctx.spawn(async move {
                terminate(ctx, name.clone()).await;
                let _ = tx.send(Outcome::TerminationDone { claim: name });
            });
        }
    }
}

/// Pod names for a span field: `namespace/name`, comma-separated (formatted only when the span
/// is recorded).
struct PodList(Vec<PodRef>);

impl std::fmt::Display for PodList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, pod) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{pod}")?;
        }
        Ok(())
    }
}
