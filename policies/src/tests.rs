//! Crate-level tests: the generated CRDs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

use super::*;

#[test]
fn crds_are_listed_in_a_stable_order() {
    let crds = crds();
    let names: Vec<_> = crds
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.quartermaster.dev",
            "nodeclaims.quartermaster.dev",
            "awsnodeclasses.quartermaster.dev",
            "gcpnodeclasses.quartermaster.dev",
            "azurenodeclasses.quartermaster.dev",
        ]
    );
    let kinds: Vec<_> = crds.iter().map(|c| c.spec.names.kind.as_str()).collect();
    assert_eq!(kinds, validate::KINDS);
    for crd in &crds {
        assert_eq!(crd.spec.group, "quartermaster.dev");
        assert_eq!(crd.spec.scope, "Cluster", "{}", crd.spec.names.kind);
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1");
        assert!(v.served && v.storage);
        assert!(
            v.subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{} has a status subresource",
            crd.spec.names.kind
        );
        assert!(
            v.additional_printer_columns
                .as_ref()
                .is_some_and(|c| !c.is_empty())
        );
    }
    let np = &crds[0];
    assert_eq!(
        np.spec.names.short_names.as_deref(),
        Some(&["np".to_owned()][..])
    );
    let columns: Vec<_> = np.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        columns.contains(&"NodeClass") && columns.contains(&"Ready") && columns.contains(&"Cost/h")
    );
    // Serialising is deterministic.
    assert_eq!(
        serde_json::to_string(&crds).unwrap(),
        serde_json::to_string(&super::crds()).unwrap()
    );
}

/// Checks the structural-schema rules Kubernetes enforces: every node has a
/// type (or is int-or-string / preserves unknown fields), no `$ref`, no
/// type under `anyOf`/`oneOf`/`allOf`/`not`, and objects declare properties
/// or additionalProperties, not both.
fn assert_structural(s: &JSONSchemaProps, path: &str) {
    assert!(s.ref_path.is_none(), "{path}: $ref is not allowed");
    let typed = s.type_.is_some()
        || s.x_kubernetes_int_or_string == Some(true)
        || s.x_kubernetes_preserve_unknown_fields == Some(true);
    assert!(typed, "{path}: missing type");
    for sub in [&s.any_of, &s.one_of, &s.all_of]
        .into_iter()
        .flatten()
        .flatten()
    {
        assert!(sub.type_.is_none(), "{path}: type inside a logical junctor");
    }
    assert!(
        !(s.properties.is_some()
            && matches!(
                s.additional_properties,
                Some(JSONSchemaPropsOrBool::Schema(_))
            )),
        "{path}: properties and additionalProperties"
    );
    for (k, sub) in s.properties.iter().flatten() {
        assert_structural(sub, &format!("{path}.{k}"));
    }
    if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &s.additional_properties {
        assert_structural(sub, &format!("{path}[*]"));
    }
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(sub)) => assert_structural(sub, &format!("{path}[]")),
        Some(JSONSchemaPropsOrArray::Schemas(_)) => panic!("{path}: tuple items"),
        None => {}
    }
    if s.type_.as_deref() == Some("array") {
        assert!(s.items.is_some(), "{path}: array without items");
    }
}

#[test]
fn schemas_are_structural() {
    for crd in crds() {
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .unwrap();
        assert_structural(schema, &crd.spec.names.kind);
        let props = schema.properties.as_ref().unwrap();
        assert!(props.contains_key("spec") && props.contains_key("status"));
    }
}

#[test]
fn schema_carries_server_side_constraints() {
    let crds = crds();
    let spec = &crds[0].spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap()
        .properties
        .as_ref()
        .unwrap()["spec"];
    let props = spec.properties.as_ref().unwrap();
    let weight = &props["weight"];
    assert_eq!((weight.minimum, weight.maximum), (Some(1.0), Some(100.0)));
    let template_spec = &props["template"].properties.as_ref().unwrap()["spec"];
    let reqs = &template_spec.properties.as_ref().unwrap()["requirements"];
    let Some(JSONSchemaPropsOrArray::Schema(item)) = &reqs.items else {
        panic!()
    };
    let operator = &item.properties.as_ref().unwrap()["operator"];
    assert_eq!(operator.enum_.as_ref().map(Vec::len), Some(8));
    assert_eq!(
        template_spec.required.as_deref(),
        Some(&["nodeClassRef".to_owned()][..])
    );
    let limits = &props["limits"];
    let Some(JSONSchemaPropsOrBool::Schema(q)) = &limits.additional_properties else {
        panic!()
    };
    assert_eq!(q.x_kubernetes_int_or_string, Some(true));
}

#[test]
fn documented_constants() {
    assert_eq!(
        labels::API_VERSION,
        format!("{}/{}", labels::GROUP, labels::VERSION)
    );
    assert_eq!(nodeclaim::CONDITION_LAUNCHED, "Launched");
    assert_eq!(nodeclaim::CONDITION_REGISTERED, "Registered");
    assert_eq!(nodeclaim::CONDITION_INITIALIZED, "Initialized");
    assert_eq!(nodeclaim::CONDITION_DRIFTED, "Drifted");
    assert_eq!(nodeclaim::CONDITION_DISRUPTING, "Disrupting");
    assert_eq!(nodeclaim::CONDITION_READY, "Ready");
}

#[test]
fn nodeclaim_status_helpers() {
    let claim: NodeClaim =
        serde_norway::from_str(include_str!("../testdata/nodeclaim.yaml")).unwrap();
    let status = claim.status.as_ref().unwrap();
    assert_eq!(
        status.provider_id.as_deref(),
        Some("aws:///us-east-1a/i-0123456789abcdef0")
    );
    assert_eq!(status.image_id.as_deref(), Some("ami-0123456789abcdef0"));
    assert_eq!(status.price_per_hour, Some(31.464));
    assert!(claim.is_condition_true(conditions::CONDITION_LAUNCHED));
    assert!(claim.is_condition_true(conditions::CONDITION_READY));
    assert!(!claim.is_condition_true(conditions::CONDITION_DRIFTED));
    assert_eq!(status.condition("Ready").unwrap().reason, "Ready");
    assert_eq!(claim.expire_after().unwrap(), None);
    assert_eq!(claim.requirements().unwrap().len(), 2);
    let back = serde_json::to_value(&claim).unwrap();
    let original: serde_json::Value =
        serde_norway::from_str(include_str!("../testdata/nodeclaim.yaml")).unwrap();
    assert_eq!(back, original);
}

#[test]
fn nodeclasses_round_trip() {
    for text in [
        include_str!("../testdata/awsnodeclass.yaml"),
        include_str!("../testdata/gcpnodeclass.yaml"),
        include_str!("../testdata/azurenodeclass.yaml"),
    ] {
        let original: serde_json::Value = serde_norway::from_str(text).unwrap();
        let obj = validate_manifest(&original).unwrap();
        let back = match &obj {
            ValidatedObject::AwsNodeClass(o) => serde_json::to_value(o),
            ValidatedObject::GcpNodeClass(o) => serde_json::to_value(o),
            ValidatedObject::AzureNodeClass(o) => serde_json::to_value(o),
            other => panic!("unexpected {}", other.kind()),
        }
        .unwrap();
        assert_eq!(back, original, "{}", obj.kind());
    }
}
