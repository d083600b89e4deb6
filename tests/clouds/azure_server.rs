//! A small Azure Resource Manager of ours on 127.0.0.1: the REST paths `azure_mgmt_compute`
//! (API 2024-07-01) calls for the Azure provider — VM PUT / GET / DELETE / list / restart, the
//! `Azure-AsyncOperation` URL a PUT or restart answers with, resource SKUs, a resource group GET,
//! capacity reservation groups (listed by subscription, GET with `$expand=instanceView`) and
//! their capacity reservations, lists paged by `nextLink` — plus the Retail Prices API, holding
//! VMs and reservations in memory, with injectable faults: a PUT whose operation finishes with
//! `AllocationFailed` for a (size, zone), and HTTP errors (429, 500, ...) queued per call. ARM
//! calls without a bearer token are answered 401.
//!
//! A capacity reservation's `virtualMachinesAllocated` (and `virtualMachinesAssociated`) are the
//! VMs held whose `capacityReservation.capacityReservationGroup.id` is its group and whose size
//! and zone are its own (a VM is never deallocated here, so both lists are the same).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use hyper::Method;
use serde_json::{Value, json};

use crate::local_server::{Api, LocalServer, Queued, Reply, Req, reply};

/// The kinds of call faults can be queued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    /// VM PUT.
    Put,
    /// VM GET.
    Get,
    /// VM list.
    List,
    /// VM DELETE.
    Delete,
    /// Operation GET.
    Operation,
    /// Resource SKUs.
    Skus,
    /// Compute usages (quotas).
    Usages,
    /// Resource group GET.
    ResourceGroup,
    /// Retail prices.
    Prices,
    /// Capacity reservation groups of the subscription (a page).
    ReservationGroups,
    /// One capacity reservation group.
    ReservationGroup,
    /// The capacity reservations of a group (a page).
    Reservations,
    /// VM restart.
    Restart,
}

/// The subscription every seeded resource is in (the tests' settings use it).
pub const SUBSCRIPTION: &str = "sub";

/// An HTTP error answered instead of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFault {
    /// HTTP status.
    pub status: u16,
    /// ARM error code.
    pub code: String,
    /// A `Retry-After` header, seconds.
    pub retry_after: Option<u64>,
}

impl HttpFault {
    /// 429 `TooManyRequests` with `Retry-After: 7`.
    pub fn throttled() -> Self {
        Self {
            status: 429,
            code: "TooManyRequests".into(),
            retry_after: Some(7),
        }
    }

    /// 500 `InternalServerError`.
    pub fn internal() -> Self {
        Self {
            status: 500,
            code: "InternalServerError".into(),
            retry_after: None,
        }
    }
}

#[derive(Default)]
struct State {
    /// VM name -> VM JSON.
    vms: BTreeMap<String, Value>,
    /// Operation id -> (VM name, final operation JSON, polls left before it is final).
    operations: BTreeMap<String, (String, Value, u32)>,
    /// (size, zone number) without capacity.
    exhausted: BTreeSet<(String, String)>,
    /// Every call, and the faults and raw answers queued per call.
    queued: Queued<Call, HttpFault>,
    /// Resource SKUs listed.
    skus: Vec<Value>,
    /// Retail price items listed.
    prices: Vec<Value>,
    /// Usages listed.
    usages: Vec<Value>,
    /// Resource groups that exist (lowercase).
    resource_groups: BTreeSet<String>,
    /// VMs created (first PUT of a name).
    creates: usize,
    /// Operations are `InProgress` for this many polls before they are final.
    polls_before_done: u32,
    next_op: u64,
    /// Capacity reservation groups: lowercase ARM id -> group JSON (without its instance view).
    groups: BTreeMap<String, Value>,
    /// Capacity reservations, in the order seeded (their ids name their groups).
    reservations: Vec<Value>,
    /// Items per page of the capacity reservation (group) lists.
    page_size: usize,
    /// Restarts asked, per VM name.
    restarts: BTreeMap<String, u32>,
}

/// The running server; stops when dropped.
pub struct AzureServer(LocalServer<State>);

impl AzureServer {
    /// A server on a free port of 127.0.0.1 holding `resource_group`; operations need one poll
    /// before they are final.
    pub async fn start(resource_group: &str) -> AzureServer {
        AzureServer(
            LocalServer::start(State {
                polls_before_done: 1,
                page_size: 100,
                resource_groups: BTreeSet::from([resource_group.to_ascii_lowercase()]),
                ..State::default()
            })
            .await,
        )
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.0.endpoint()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state()
    }

    /// PUTs of `size` in zone number `zone` finish with `AllocationFailed`.
    pub fn exhaust(&self, size: &str, zone: &str) {
        self.state()
            .exhausted
            .insert((size.to_owned(), zone.to_owned()));
    }

    /// The next `call` answers `fault`.
    pub fn fail_next(&self, call: Call, fault: HttpFault) {
        self.state().queued.fail_next(call, fault);
    }

    /// The next `call` is answered `status` with `body` verbatim (`application/json`, whatever
    /// it holds), without doing anything: malformed or surprising responses.
    pub fn reply_next(&self, call: Call, status: u16, body: impl Into<String>) {
        self.state().queued.reply_next(call, status, body.into());
    }

    /// The resource SKUs the SKU list answers.
    pub fn set_skus(&self, skus: Vec<Value>) {
        self.state().skus = skus;
    }

    /// The compute usages (quotas) listed: (family, current, limit).
    pub fn set_usages(&self, usages: &[(&str, i64, i64)]) {
        self.state().usages = usages
            .iter()
            .map(|(name, current, limit)| {
                json!({"name": {"value": name, "localizedValue": name}, "currentValue": current, "limit": limit, "unit": "Count"})
            })
            .collect();
    }

    /// The price items the Retail Prices API answers.
    pub fn set_prices(&self, items: Vec<Value>) {
        self.state().prices = items;
    }

    /// Puts a running VM in place, as if launched earlier (or by someone else).
    pub fn put_vm(&self, name: &str, size: &str, zone: &str, tags: &[(&str, &str)]) {
        let tags: BTreeMap<&str, &str> = tags.iter().copied().collect();
        let vm = json!({
            "id": format!("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}"),
            "name": name,
            "type": "Microsoft.Compute/virtualMachines",
            "location": "eastus",
            "zones": [zone],
            "tags": tags,
            "properties": {
                "hardwareProfile": {"vmSize": size},
                "priority": "Regular",
                "provisioningState": "Succeeded",
                "timeCreated": "2026-12-01T00:00:00Z",
            },
        });
        self.state().vms.insert(name.to_owned(), vm);
    }

    /// Adds a capacity reservation `name` of `capacity` VMs of `size` in zone number `zone` to
    /// the capacity reservation group `group` of resource group `resource_group` (made when
    /// missing), in eastus; returns the reservation's ARM id.
    #[allow(clippy::too_many_arguments)]
    pub fn add_capacity_reservation(
        &self,
        resource_group: &str,
        group: &str,
        name: &str,
        size: &str,
        zone: &str,
        capacity: i64,
        tags: &[(&str, &str)],
    ) -> String {
        let group_id = format!(
            "/subscriptions/{SUBSCRIPTION}/resourceGroups/{resource_group}/providers/Microsoft.Compute/capacityReservationGroups/{group}"
        );
        let id = format!("{group_id}/capacityReservations/{name}");
        let tags: BTreeMap<&str, &str> = tags.iter().copied().collect();
        let mut st = self.state();
        let g = st
            .groups
            .entry(group_id.to_ascii_lowercase())
            .or_insert_with(|| {
                json!({
                    "id": group_id, "name": group, "type": "Microsoft.Compute/capacityReservationGroups",
                    "location": "eastus", "zones": [],
                    "properties": {"capacityReservations": []},
                })
            });
        g["zones"].as_array_mut().expect("zones").push(json!(zone));
        g["properties"]["capacityReservations"]
            .as_array_mut()
            .expect("reservations")
            .push(json!({ "id": id }));
        let n = st.reservations.len();
        st.reservations.push(json!({
            "id": id, "name": name,
            "type": "Microsoft.Compute/capacityReservationGroups/capacityReservations",
            "location": "eastus", "zones": [zone], "tags": tags,
            "sku": {"name": size, "capacity": capacity},
            "properties": {
                "reservationId": format!("00000000-0000-0000-0000-{n:012}"),
                "platformFaultDomainCount": 1,
                "provisioningState": "Succeeded",
                "timeCreated": "2026-12-01T00:00:00Z",
            },
        }));
        id
    }

    /// Capacity reservation (group) lists answer `n` items a page.
    pub fn set_page_size(&self, n: usize) {
        self.state().page_size = n.max(1);
    }

    /// Puts a running VM of someone else's in capacity reservation group `group_id`.
    pub fn put_reserved_vm(&self, name: &str, size: &str, zone: &str, group_id: &str) {
        self.put_vm(name, size, zone, &[]);
        if let Some(vm) = self.state().vms.get_mut(name) {
            vm["properties"]["capacityReservation"] =
                json!({ "capacityReservationGroup": { "id": group_id } });
        }
    }

    /// Restarts asked of VM `name`.
    pub fn restarts(&self, name: &str) -> u32 {
        self.state().restarts.get(name).copied().unwrap_or(0)
    }

    /// The VM names held.
    pub fn vm_names(&self) -> Vec<String> {
        self.state().vms.keys().cloned().collect()
    }

    /// One VM's JSON, as stored.
    pub fn vm(&self, name: &str) -> Option<Value> {
        self.state().vms.get(name).cloned()
    }

    /// VMs created (the first PUT of each name).
    pub fn creates(&self) -> usize {
        self.state().creates
    }

    /// How many calls started with `prefix` (`PUT`, `GET /subscriptions/...`).
    pub fn calls(&self, prefix: &str) -> usize {
        self.state().queued.count(prefix)
    }
}

fn error(status: u16, code: &str, message: &str, retry_after: Option<u64>) -> Reply {
    let headers: Vec<(&str, String)> = retry_after
        .map(|s| ("retry-after", s.to_string()))
        .into_iter()
        .collect();
    reply(
        status,
        &json!({"error": {"code": code, "message": message}}),
        &headers,
    )
}

/// What a path asks for.
enum Route {
    Vm(String),
    Restart(String),
    Vms,
    ReservationGroups,
    /// A group, by lowercase ARM id.
    ReservationGroup(String),
    /// A group's reservations, by the group's lowercase ARM id.
    Reservations(String),
    Operation(String),
    Skus,
    Usages,
    ResourceGroup(String),
    Prices,
    Unknown,
}

fn route(path: &str) -> Route {
    if path == "/api/retail/prices" {
        return Route::Prices;
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let lower: Vec<String> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
    let l: Vec<&str> = lower.iter().map(String::as_str).collect();
    match l.as_slice() {
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.compute",
            "virtualmachines",
        ] => Route::Vms,
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.compute",
            "virtualmachines",
            _,
        ] => Route::Vm(parts[7].to_owned()),
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.compute",
            "virtualmachines",
            _,
            "restart",
        ] => Route::Restart(parts[7].to_owned()),
        [
            "subscriptions",
            _,
            "providers",
            "microsoft.compute",
            "capacityreservationgroups",
        ] => Route::ReservationGroups,
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.compute",
            "capacityreservationgroups",
            _,
        ] => Route::ReservationGroup(format!("/{}", l.join("/"))),
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.compute",
            "capacityreservationgroups",
            _,
            "capacityreservations",
        ] => Route::Reservations(format!("/{}", l[..8].join("/"))),
        [
            "subscriptions",
            _,
            "providers",
            "microsoft.compute",
            "locations",
            _,
            "operations",
            _,
        ] => Route::Operation(parts[7].to_owned()),
        ["subscriptions", _, "providers", "microsoft.compute", "skus"] => Route::Skus,
        [
            "subscriptions",
            _,
            "providers",
            "microsoft.compute",
            "locations",
            _,
            "usages",
        ] => Route::Usages,
        ["subscriptions", _, "resourcegroups", rg] => Route::ResourceGroup((*rg).to_owned()),
        _ => Route::Unknown,
    }
}

impl Api for State {
    type Call = Call;
    type Fault = HttpFault;

    fn queued(&mut self) -> &mut Queued<Call, HttpFault> {
        &mut self.queued
    }

    fn call_of(&self, req: &Req) -> Result<Call, Box<Reply>> {
        let (method, path) = (&req.method, &req.path);
        let authorized = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("Bearer ") && v.len() > "Bearer ".len());
        let route = route(path);
        let call = match (method, &route) {
            (&Method::PUT, Route::Vm(_)) => Some(Call::Put),
            (&Method::GET, Route::Vm(_)) => Some(Call::Get),
            (&Method::DELETE, Route::Vm(_)) => Some(Call::Delete),
            (&Method::GET, Route::Vms) => Some(Call::List),
            (&Method::GET, Route::Operation(_)) => Some(Call::Operation),
            (&Method::GET, Route::Skus) => Some(Call::Skus),
            (&Method::GET, Route::Usages) => Some(Call::Usages),
            (&Method::GET, Route::ResourceGroup(_)) => Some(Call::ResourceGroup),
            (&Method::GET, Route::Prices) => Some(Call::Prices),
            (&Method::GET, Route::ReservationGroups) => Some(Call::ReservationGroups),
            (&Method::GET, Route::ReservationGroup(_)) => Some(Call::ReservationGroup),
            (&Method::GET, Route::Reservations(_)) => Some(Call::Reservations),
            (&Method::POST, Route::Restart(_)) => Some(Call::Restart),
            _ => None,
        };
        let Some(call) = call else {
            return Err(Box::new(error(
                404,
                "NotFound",
                &format!("no route {method} {path}"),
                None,
            )));
        };
        if call != Call::Prices && !authorized {
            return Err(Box::new(error(
                401,
                "AuthenticationFailed",
                "no bearer token",
                None,
            )));
        }
        Ok(call)
    }

    fn fault(&self, f: &HttpFault) -> Reply {
        error(f.status, &f.code, "injected fault", f.retry_after)
    }

    fn answer(&mut self, _call: Call, req: Req, addr: SocketAddr) -> Reply {
        let st = &mut *self;
        let (method, path, query) = (req.method, req.path, req.query);
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let route = route(&path);
        match route {
            Route::Vm(name) => match method {
                Method::PUT => put_vm(st, &name, &body, &path, addr),
                Method::GET => match st.vms.get(&name) {
                    Some(vm) => reply(200, vm, &[]),
                    None => error(
                        404,
                        "ResourceNotFound",
                        &format!("VM {name} not found"),
                        None,
                    ),
                },
                _ => match st.vms.remove(&name) {
                    Some(_) => reply(202, &Value::Null, &[]),
                    None => reply(204, &Value::Null, &[]),
                },
            },
            Route::Vms => {
                let vms: Vec<Value> = st.vms.values().cloned().collect();
                reply(200, &json!({ "value": vms }), &[])
            }
            Route::Operation(id) => operation(st, &id),
            Route::Skus => reply(200, &json!({ "value": st.skus }), &[]),
            Route::Usages => reply(200, &json!({ "value": st.usages }), &[]),
            Route::ResourceGroup(rg) => {
                if st.resource_groups.contains(&rg) {
                    reply(200, &json!({ "name": rg, "location": "eastus" }), &[])
                } else {
                    error(
                        404,
                        "ResourceGroupNotFound",
                        &format!("resource group {rg} not found"),
                        None,
                    )
                }
            }
            Route::Prices => reply(
                200,
                &json!({ "BillingCurrency": "USD", "Items": st.prices, "NextPageLink": null, "Count": st.prices.len() }),
                &[],
            ),
            Route::Restart(name) => restart(st, &name, &path, addr),
            Route::ReservationGroups => {
                let groups: Vec<Value> = st.groups.values().cloned().collect();
                page(&groups, st.page_size, &query, &path, addr)
            }
            Route::ReservationGroup(id) => match st.groups.get(&id) {
                Some(g) => {
                    let mut g = g.clone();
                    if query.get("$expand").map(String::as_str) == Some("instanceView") {
                        g["properties"]["instanceView"] = instance_view(st, &id);
                    }
                    reply(200, &g, &[])
                }
                None => error(
                    404,
                    "ResourceNotFound",
                    &format!("capacity reservation group {id} not found"),
                    None,
                ),
            },
            Route::Reservations(group) => {
                if st.groups.contains_key(&group) {
                    let rs: Vec<Value> = reservations_of(st, &group)
                        .into_iter()
                        .map(|r| {
                            let mut r = r.clone();
                            r["properties"]["virtualMachinesAssociated"] = json!(allocated(st, &r));
                            r
                        })
                        .collect();
                    page(&rs, st.page_size, &query, &path, addr)
                } else {
                    error(
                        404,
                        "ResourceNotFound",
                        &format!("capacity reservation group {group} not found"),
                        None,
                    )
                }
            }
            Route::Unknown => error(404, "NotFound", "no route", None),
        }
    }
}

fn put_vm(st: &mut State, name: &str, body: &Value, path: &str, addr: SocketAddr) -> Reply {
    let size = body["properties"]["hardwareProfile"]["vmSize"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let zone = body["zones"][0].as_str().unwrap_or_default().to_owned();
    let location = body["location"].as_str().unwrap_or("eastus").to_owned();
    if size.is_empty() || body["properties"]["networkProfile"].is_null() {
        return error(
            400,
            "InvalidParameter",
            "vmSize and networkProfile are required",
            None,
        );
    }
    let mut vm = body.clone();
    vm["id"] = json!(path);
    vm["name"] = json!(name);
    vm["type"] = json!("Microsoft.Compute/virtualMachines");
    vm["properties"]["provisioningState"] = json!("Creating");
    vm["properties"]["timeCreated"] = json!("2026-12-01T00:00:00Z");
    let created = !st.vms.contains_key(name);
    if created {
        st.creates += 1;
    }
    st.vms.insert(name.to_owned(), vm.clone());
    st.next_op += 1;
    let id = format!("op-{}", st.next_op);
    let done = if st.exhausted.contains(&(size.clone(), zone.clone())) {
        json!({"status": "Failed", "error": {"code": "AllocationFailed", "message": format!("Allocation failed: no capacity for {size} in zone {zone}")}})
    } else {
        json!({"status": "Succeeded"})
    };
    let polls = st.polls_before_done;
    st.operations
        .insert(id.clone(), (name.to_owned(), done, polls));
    let subscription = path.split('/').nth(2).unwrap_or_default();
    let url = format!(
        "http://{addr}/subscriptions/{subscription}/providers/Microsoft.Compute/locations/{location}/operations/{id}?api-version=2024-07-01"
    );
    reply(
        if created { 201 } else { 200 },
        &vm,
        &[("azure-asyncoperation", url)],
    )
}

/// One page of `items` at `$skiptoken` (an offset), with a `nextLink` to the next when there is
/// one.
fn page(
    items: &[Value],
    size: usize,
    query: &BTreeMap<String, String>,
    path: &str,
    addr: SocketAddr,
) -> Reply {
    let from = query
        .get("$skiptoken")
        .and_then(|t| t.parse::<usize>().ok())
        .unwrap_or(0)
        .min(items.len());
    let to = (from + size).min(items.len());
    let mut body = json!({ "value": items[from..to] });
    if to < items.len() {
        body["nextLink"] = json!(format!(
            "http://{addr}{path}?api-version=2024-07-01&$skiptoken={to}"
        ));
    }
    reply(200, &body, &[])
}

/// The reservations of the group with lowercase ARM id `group`.
fn reservations_of<'a>(st: &'a State, group: &str) -> Vec<&'a Value> {
    st.reservations
        .iter()
        .filter(|r| {
            r["id"].as_str().is_some_and(|id| {
                id.to_ascii_lowercase()
                    .starts_with(&format!("{group}/capacityreservations/"))
            })
        })
        .collect()
}

/// `[{id}]` of the VMs held in reservation `r`: in its group, of its size and zone, not failed.
fn allocated(st: &State, r: &Value) -> Vec<Value> {
    let id = r["id"].as_str().unwrap_or_default().to_ascii_lowercase();
    let group = id
        .rsplit_once("/capacityreservations/")
        .map_or("", |(g, _)| g);
    st.vms
        .values()
        .filter(|vm| {
            vm["properties"]["capacityReservation"]["capacityReservationGroup"]["id"]
                .as_str()
                .is_some_and(|g| g.eq_ignore_ascii_case(group))
                && vm["properties"]["hardwareProfile"]["vmSize"] == r["sku"]["name"]
                && vm["zones"][0] == r["zones"][0]
                && vm["properties"]["provisioningState"] != "Failed"
        })
        .map(|vm| json!({ "id": vm["id"] }))
        .collect()
}

/// A group's instance view: each reservation's utilisation, by name.
fn instance_view(st: &State, group: &str) -> Value {
    let views: Vec<Value> = reservations_of(st, group)
        .into_iter()
        .map(|r| {
            json!({
                "name": r["name"],
                "utilizationInfo": {
                    "currentCapacity": r["sku"]["capacity"],
                    "virtualMachinesAllocated": allocated(st, r),
                },
                "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info"}],
            })
        })
        .collect();
    json!({ "capacityReservations": views })
}

/// A VM restart: 202 with an operation to follow, or 404 for a VM not held.
fn restart(st: &mut State, name: &str, path: &str, addr: SocketAddr) -> Reply {
    if !st.vms.contains_key(name) {
        return error(
            404,
            "ResourceNotFound",
            &format!(
                "The Resource 'Microsoft.Compute/virtualMachines/{name}' under resource group 'rg' was not found."
            ),
            None,
        );
    }
    *st.restarts.entry(name.to_owned()).or_default() += 1;
    st.next_op += 1;
    let id = format!("op-{}", st.next_op);
    let polls = st.polls_before_done;
    st.operations.insert(
        id.clone(),
        (name.to_owned(), json!({"status": "Succeeded"}), polls),
    );
    let subscription = path.split('/').nth(2).unwrap_or_default();
    let url = format!(
        "http://{addr}/subscriptions/{subscription}/providers/Microsoft.Compute/locations/eastus/operations/{id}?api-version=2024-07-01"
    );
    reply(202, &Value::Null, &[("azure-asyncoperation", url)])
}

fn operation(st: &mut State, id: &str) -> Reply {
    let Some((name, done, polls)) = st.operations.get_mut(id) else {
        return error(404, "NotFound", "no such operation", None);
    };
    if *polls > 0 {
        *polls -= 1;
        return reply(200, &json!({"status": "InProgress"}), &[]);
    }
    let (name, done) = (name.clone(), done.clone());
    let final_state = if done["status"] == "Succeeded" {
        "Succeeded"
    } else {
        "Failed"
    };
    if let Some(vm) = st.vms.get_mut(&name) {
        vm["properties"]["provisioningState"] = json!(final_state);
    }
    reply(200, &done, &[])
}
