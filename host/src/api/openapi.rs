//! The OpenAPI 3.1 document, built from the route table
//! ([`super::routes::ROUTES`]) — the same table the router is built from,
//! so a route cannot exist undocumented. Written by hand rather than with
//! `utoipa`: the table already holds what the document says (paths,
//! methods, query parameters, bodies, who may call), and one more
//! proc-macro dependency would buy annotations that could drift from it.

use super::routes::{Body, ROUTES};
use serde_json::{Map, Value, json};

/// The document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let item = paths
            .entry(route.path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        item[route.method.to_lowercase()] = operation(route);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Paddock admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every route but this document needs `Authorization: Bearer pdk_...`. \
                Errors are `{\"error\": {\"code\", \"message\"}}`. Lists take `limit` (1-500) \
                and `after` (the previous page's `next`).",
        },
        "components": {
            "securitySchemes": { "token": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": { "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {
                            "code": { "type": "string" },
                            "message": { "type": "string" },
                            "request_id": {
                                "type": "string",
                                "description": "on a 500 only: the id under which the server logged the detail (also the x-request-id header)",
                            },
                        },
                    } },
                },
            },
        },
        "paths": paths,
    })
}

fn operation(route: &super::routes::Route) -> Value {
    let mut parameters: Vec<Value> = route
        .path
        .split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
        .collect();
    parameters.extend(route.query.iter().map(|name| {
        json!({ "name": name, "in": "query", "required": false, "schema": { "type": "string" } })
    }));
    let error = json!({ "description": "An error", "content": { "application/json": {
        "schema": { "$ref": "#/components/schemas/Error" } } } });
    let mut op = json!({
        "operationId": format!("{} {}", route.method, route.path),
        "summary": route.summary,
        "parameters": parameters,
        "responses": { "200": { "description": "OK" }, "4XX": error },
        "x-paddock-action": route.action.map(|a| format!("{a:?}")),
    });
    match route.action {
        Some(_) => op["security"] = json!([{ "token": [] }]),
        None => op["security"] = json!([]),
    }
    match route.body {
        Body::None => {}
        Body::Json(schema) => {
            op["requestBody"] = json!({ "required": true, "content": { "application/json": {
                "schema": { "type": "object", "title": schema } } } });
        }
        Body::Bytes => {
            op["requestBody"] = json!({ "required": true, "content": { "application/wasm": {
                "schema": { "type": "string", "format": "binary" } } } });
        }
    }
    op
}
