//! The real clouds' SDKs against local endpoints: AWS through `aws-sdk-ec2` against moto, with
//! our fault-injecting proxy in front for what moto does not simulate.

mod aws;
mod aws_catalog_live;
mod aws_chaos;
mod aws_drift;
mod aws_prices;
mod azure;
mod azure_server;
mod bad_responses;
mod fault_proxy;
mod gcp;
mod gcp_server;
mod local_server;
mod moto;
