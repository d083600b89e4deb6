//! HTTP endpoints: `/metrics`, `/cost` and the page (`/`, `/status.json`, see [`crate::page`])
//! on the metrics port, `/healthz` and `/readyz` on the health-probe port. Every replica serves
//! them, leader or not.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use quartermaster_cost::{Billing, fleet_cost, write_csv};
use serde::Deserialize;

use crate::ControllerError;
use crate::context::Context;
use crate::fleet::usage;

/// `/cost` query parameters.
#[derive(Debug, Deserialize)]
pub struct CostQuery {
    /// `json` (default) or `csv` (the FOCUS allocation).
    pub format: Option<String>,
}

/// The metrics router: `/metrics`, `/cost`, and the page: `/` and `/status.json`.
pub fn metrics_router(ctx: Arc<Context>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/cost", get(cost))
        .route("/", get(crate::page::index))
        .route("/status.json", get(crate::page::status_json))
        .with_state(ctx)
}

/// The health router: `/healthz` (alive), `/readyz` (every store synced).
pub fn health_router(ctx: Arc<Context>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(ctx)
}

async fn metrics(State(ctx): State<Arc<Context>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        ctx.metrics.encode(),
    )
        .into_response()
}

async fn ready(State(ctx): State<Arc<Context>>) -> Response {
    if ctx.stores.synced() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stores not synced yet").into_response()
    }
}

async fn cost(State(ctx): State<Arc<Context>>, Query(q): Query<CostQuery>) -> Response {
    let now = ctx.clock.now();
    let (nodes, mut pods) = usage(
        &ctx.stores.node_claims.state(),
        &ctx.stores.pods.state(),
        &ctx.catalog,
    );
    pods.extend(ctx.headroom.get());
    match q.format.as_deref() {
        None | Some("json") => axum::Json(fleet_cost(&nodes, &pods, now)).into_response(),
        Some("csv") => {
            let mut out = Vec::new();
            match write_csv(
                &nodes,
                &pods,
                now,
                &Billing::for_cluster(&ctx.cluster_name),
                &mut out,
            ) {
                Ok(_) => ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], out).into_response(),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
            }
        }
        Some(other) => (
            StatusCode::BAD_REQUEST,
            format!("format {other:?} is not one of json, csv"),
        )
            .into_response(),
    }
}

/// Binds `port` on all interfaces (a port in use is an error now, not later).
pub async fn bind(port: u16) -> Result<tokio::net::TcpListener, ControllerError> {
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ControllerError::Http(format!("binding {addr}: {e}")))
}

/// Serves `router` on `listener` until `stop` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ControllerError> {
    axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await
        .map_err(|e| ControllerError::Http(e.to_string()))
}
