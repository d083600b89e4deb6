//! The Cloud Billing Catalog over HTTP: pages of Compute Engine SKUs, for `catalog --live`, the
//! controller's price refresh and `doctor`'s price check.

use std::time::Duration;

use super::{COMPUTE_SERVICE, Sku};
use crate::errors::GcpError;

/// Where the Cloud Billing API is (a local server in tests); default the public one.
pub const BILLING_ENDPOINT_ENV: &str = "GCP_BILLING_ENDPOINT";
/// An API key for the Cloud Billing Catalog, sent as `X-Goog-Api-Key` (otherwise an ADC token).
pub const BILLING_API_KEY_ENV: &str = "GCP_BILLING_API_KEY";
/// Pages of SKUs read at most (Compute Engine has a few tens of thousands, 5000 a page).
pub const MAX_SKU_PAGES: usize = 40;
/// How long a credential token may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The Cloud Billing endpoint: `GCP_BILLING_ENDPOINT`, else the public one.
pub fn billing_endpoint() -> String {
    std::env::var(BILLING_ENDPOINT_ENV)
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| super::BILLING_ENDPOINT.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// How Cloud Billing calls authenticate: an API key, a bearer token, or nothing (a plain-http
/// endpoint: a local server).
#[derive(Debug)]
pub(crate) enum BillingAuth {
    None,
    ApiKey(String),
    Bearer(String),
}

fn failed(what: impl std::fmt::Display, why: impl std::fmt::Display) -> GcpError {
    GcpError::Billing(format!("{what}: {why}"))
}

/// Up to `max_pages` pages of Compute Engine SKUs from `billing`.
pub async fn fetch_skus(billing: &str, max_pages: usize) -> Result<Vec<Sku>, GcpError> {
    let auth = if let Ok(key) = std::env::var(BILLING_API_KEY_ENV) {
        BillingAuth::ApiKey(key)
    } else if billing.starts_with("http://") {
        BillingAuth::None
    } else {
        let token = tokio::time::timeout(TOKEN_TIMEOUT, crate::credentials::access_token())
            .await
            .map_err(|e| failed("no credentials for the Cloud Billing API in time", e))??;
        BillingAuth::Bearer(token)
    };
    let billing = billing.to_owned();
    tokio::task::spawn_blocking(move || fetch_skus_blocking(&billing, &auth, max_pages))
        .await
        .map_err(|e| failed("the Cloud Billing fetch stopped", e))?
}

pub(crate) fn fetch_skus_blocking(
    billing: &str,
    auth: &BillingAuth,
    max_pages: usize,
) -> Result<Vec<Sku>, GcpError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{billing}/v1/{COMPUTE_SERVICE}/skus");
    let mut skus = Vec::new();
    let mut token = String::new();
    for _ in 0..max_pages {
        let mut request = agent
            .get(&url)
            .query("currencyCode", "USD")
            .query("pageSize", "5000");
        if !token.is_empty() {
            request = request.query("pageToken", &token);
        }
        request = match auth {
            BillingAuth::None => request,
            BillingAuth::ApiKey(key) => request.header("x-goog-api-key", key),
            BillingAuth::Bearer(t) => request.header("authorization", format!("Bearer {t}")),
        };
        let mut response = request
            .call()
            .map_err(|e| failed(format!("calling {url}"), e))?;
        let status = response.status();
        let body = response
            .body_mut()
            .with_config()
            .limit(1 << 28)
            .read_to_string()
            .map_err(|e| failed(format!("reading the answer of {url}"), e))?;
        if !status.is_success() {
            return Err(GcpError::Billing(format!(
                "{url} answered {status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        let page = super::parse_page(&body)?;
        skus.extend(page.skus);
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    Ok(skus)
}

/// A one-thread HTTP server answering each request with the next of `pages` (status, body),
/// recording the request lines (tests of the HTTP readers here and in `doctor`).
#[cfg(test)]
pub(crate) fn serve(pages: Vec<(u16, String)>) -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (status, body) in pages {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            reader.read_line(&mut head).unwrap();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok() && line.trim() != "" {
                line.clear();
            }
            let _ = tx.send(head.trim().to_owned());
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://{addr}"), rx)
}

#[cfg(test)]
mod tests {
    use quartermaster_pricing::Catalog;

    use super::*;

    fn sku(description: &str, usage: &str, nanos: i64) -> String {
        format!(
            r#"{{"description": "{description} running in Americas", "category": {{"resourceFamily": "Compute", "usageType": "{usage}"}}, "serviceRegions": ["us-central1"], "pricingInfo": [{{"pricingExpression": {{"usageUnit": "h", "tieredRates": [{{"startUsageAmount": 0, "unitPrice": {{"currencyCode": "USD", "units": "0", "nanos": {nanos}}}}}]}}}}]}}"#
        )
    }

    #[test]
    fn skus_are_read_page_by_page_and_priced() {
        let page1 = format!(
            r#"{{"skus": [{}, {}], "nextPageToken": "p2"}}"#,
            sku("G2 Instance Core", "OnDemand", 25_000_000),
            sku("G2 Instance Ram", "OnDemand", 3_000_000)
        );
        let page2 = format!(
            r#"{{"skus": [{}], "nextPageToken": ""}}"#,
            sku("Nvidia L4 GPU", "OnDemand", 500_000_000)
        );
        let (base, requests) = serve(vec![(200, page1), (200, page2)]);
        let skus = fetch_skus_blocking(&base, &BillingAuth::None, MAX_SKU_PAGES).unwrap();
        assert_eq!(skus.len(), 3);
        let first = requests.recv().unwrap();
        assert!(
            first.starts_with("GET /v1/services/6F81-5844-456A/skus?"),
            "{first}"
        );
        assert!(requests.recv().unwrap().contains("pageToken=p2"));
        let now = chrono::DateTime::from_timestamp(1_764_547_200, 0).unwrap();
        let quotes = super::super::quotes(&skus, &Catalog::embedded(), "us-central1", now);
        let g2 = quotes
            .iter()
            .find(|q| q.instance_type == "g2-standard-4")
            .expect("g2-standard-4 priced");
        assert!((g2.price_per_hour - (4.0 * 0.025 + 16.0 * 0.003 + 0.5)).abs() < 1e-9);
    }

    #[test]
    fn an_error_answer_or_a_dead_endpoint_is_an_error() {
        let (base, _requests) = serve(vec![(403, r#"{"error": {"code": 403}}"#.into())]);
        let e = fetch_skus_blocking(&base, &BillingAuth::None, 1).unwrap_err();
        assert!(e.to_string().contains("403"), "{e}");
        assert!(fetch_skus_blocking("http://127.0.0.1:1", &BillingAuth::None, 1).is_err());
    }
}
