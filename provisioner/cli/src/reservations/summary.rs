//! What is left in each reservation: `plan`'s "Reserved capacity" table and its
//! `reservations` JSON key, and the reservations `catalog --live` lists.

use std::io::Write;

use chrono::{DateTime, Utc};
use quartermaster_pricing::{Catalog, Reservation, ReservationKind};
use quartermaster_solver::{ClusterSnapshot, Plan};
use serde_json::{Value, json};

use super::{PoolFor, Reserved, Window, time};
use crate::output::{Table, money};

/// One reservation after the plan.
pub struct PlanRow {
    /// The reservation as offered (count capped at available + the input's own nodes).
    pub reservation: Reservation,
    /// The count the file gives.
    pub count: u32,
    /// Free slots before the plan.
    pub free: u32,
    /// Slots this plan fills.
    pub used: u32,
    /// Pods on them.
    pub pods: Vec<String>,
    /// NodePools whose NodeClass selects it.
    pub pools: Vec<String>,
    /// Why fewer slots than free were offered to the plan, if so.
    pub note: Option<String>,
    /// Its window at the plan's time.
    pub window: Window,
}

/// One row per reservation of the run.
pub fn plan_rows(
    reserved: &Reserved,
    plan: &Plan,
    landed: &[Option<String>],
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
) -> Vec<PlanRow> {
    reserved
        .offers
        .iter()
        .zip(&reserved.given)
        .map(|(offer, given)| {
            let r = &offer.reservation;
            let free = reserved.free(offer);
            let offered = reserved.offered(offer);
            let pods: Vec<String> = reserved
                .used_by(&r.id, plan, landed)
                .iter()
                .map(ToString::to_string)
                .collect();
            let used = u32::try_from(
                landed
                    .iter()
                    .filter(|l| l.as_deref() == Some(r.id.as_str()))
                    .count(),
            )
            .unwrap_or(u32::MAX);
            let window = Window::of(r, reserved.now);
            let note = (offered < free).then(|| {
                why_fewer(reserved, offer, snapshot, catalog, window, free, offered)
            });
            let note = note.or_else(|| {
                (free == 0).then(|| {
                    let held = reserved.taken.get(&r.id).copied().unwrap_or(0);
                    match given.available {
                        Some(a) => format!(
                            "full: the file says {a} of {} available, {held} held by Nodes of the input",
                            given.count
                        ),
                        None => format!("full: {held} slot(s) held by Nodes of the input"),
                    }
                })
            });
            PlanRow {
                reservation: r.clone(),
                count: given.count,
                free,
                used,
                pods,
                pools: offer.pools.clone(),
                note,
                window,
            }
        })
        .collect()
}

/// Why a reservation offered fewer slots than it has free.
fn why_fewer(
    reserved: &Reserved,
    offer: &quartermaster_engine::ReservationOffer,
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    window: Window,
    free: u32,
    offered: u32,
) -> String {
    match window {
        Window::NotOpen(start) => return format!("not open yet: opens {}", time(start)),
        Window::Draining { drain_at, end } => {
            return if reserved.now >= end {
                format!("ended {}", time(end))
            } else {
                format!(
                    "draining since {}: no launches within 40 min of its end",
                    time(drain_at)
                )
            };
        }
        Window::Open => {}
    }
    match reserved.pool_for(offer, snapshot, catalog) {
        PoolFor::NotSelected => {
            "no NodePool's NodeClass selects it (capacityReservationSelectorTerms)".to_owned()
        }
        PoolFor::Excluded { pool, detail } => {
            format!("NodePool {pool}'s requirements exclude it: {detail}")
        }
        PoolFor::Pool(pool) => format!(
            "NodePool {}'s limits leave {offered} of its {free} free slot(s)",
            reserved.pools[pool].name
        ),
    }
}

/// `END` for a table: the end, and a block's drain time.
fn end_cell(r: &Reservation) -> String {
    match (r.end, r.kind) {
        (None, _) => "-".to_owned(),
        (Some(end), ReservationKind::CapacityBlock) => format!(
            "{} (drain {})",
            time(end),
            r.drain_at().map(time).unwrap_or_default()
        ),
        (Some(end), ReservationKind::Default) => time(end),
    }
}

fn optional_time(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| json!(time(t)))
}

/// `plan -o json`'s `reservations`: keys are only ever added.
pub fn plan_json(rows: &[PlanRow], now: DateTime<Utc>) -> Value {
    rows.iter()
        .map(|row| {
            let r = &row.reservation;
            json!({
                "id": r.id,
                "cloud": r.cloud.to_string(),
                "type": r.kind.as_str(),
                "instance_type": r.instance_type,
                "zone": r.zone,
                "count": row.count,
                "free": row.free,
                "used": row.used,
                "left": row.free.saturating_sub(row.used),
                "end": optional_time(r.end),
                "pools": row.pools,
                "start": optional_time(r.start),
                "drain_at": optional_time(r.drain_at()),
                "status": row.window.status(now),
                "price_per_hour": r.price_per_hour,
                "pods": row.pods,
                "note": row.note,
            })
        })
        .collect()
}

/// `plan`'s "Reserved capacity" table.
pub fn write_plan_table(rows: &[PlanRow], out: &mut dyn Write) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nReserved capacity:")?;
    let mut table = Table::new([
        "ID",
        "TYPE",
        "ZONE",
        "INSTANCE TYPE",
        "COUNT",
        "FREE",
        "USED",
        "LEFT",
        "END",
        "NOTE",
    ]);
    for row in rows {
        let r = &row.reservation;
        table.push([
            r.id.clone(),
            r.kind.as_str().to_owned(),
            r.zone.clone(),
            r.instance_type.clone(),
            row.count.to_string(),
            row.free.to_string(),
            row.used.to_string(),
            row.free.saturating_sub(row.used).to_string(),
            end_cell(r),
            row.note.clone().unwrap_or_default(),
        ]);
    }
    table.write(out)?;
    let paid: f64 = rows
        .iter()
        .filter(|row| row.window == Window::Open)
        .map(|row| f64::from(row.count) * row.reservation.price_per_hour)
        .sum();
    writeln!(
        out,
        "Reservations are paid whether used or not (${}/hour for the open ones); a slot used costs nothing more.",
        money(paid)
    )?;
    Ok(())
}

/// `catalog --live`'s reservations, as JSON (the plan's keys without `used`, `left`, `pools`;
/// `free` is what the cloud says is available, `null` when it does not say).
pub fn live_json(r: &Reservation, now: DateTime<Utc>) -> Value {
    json!({
        "id": r.id,
        "cloud": r.cloud.to_string(),
        "type": r.kind.as_str(),
        "instance_type": r.instance_type,
        "zone": r.zone,
        "count": r.count,
        "free": r.available,
        "end": optional_time(r.end),
        "start": optional_time(r.start),
        "drain_at": optional_time(r.drain_at()),
        "status": Window::of(r, now).status(now),
        "price_per_hour": r.price_per_hour,
        "tags": r.tags,
    })
}

/// `catalog --live`'s "Reservations" table.
pub fn write_live_table(
    reservations: &[Reservation],
    now: DateTime<Utc>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(out, "\nReservations:")?;
    if reservations.is_empty() {
        writeln!(out, "none")?;
        return Ok(());
    }
    let mut table = Table::new([
        "ID",
        "TYPE",
        "ZONE",
        "INSTANCE TYPE",
        "COUNT",
        "FREE",
        "START",
        "END",
        "STATUS",
    ]);
    for r in reservations {
        table.push([
            r.id.clone(),
            r.kind.as_str().to_owned(),
            r.zone.clone(),
            r.instance_type.clone(),
            r.count.to_string(),
            r.available.map_or("-".to_owned(), |a| a.to_string()),
            r.start.map_or("-".to_owned(), time),
            end_cell(r),
            Window::of(r, now).status(now).to_owned(),
        ]);
    }
    table.write(out)?;
    Ok(())
}
