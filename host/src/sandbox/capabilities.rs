//! Reading a compiled component's capability manifest: every import and
//! export, with the functions of each interface (see
//! [`crate::model::capability`] for the checks made against it).

use crate::model::capability::{Capability, CapabilityManifest};
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

pub fn read_manifest(engine: &Engine, component: &Component) -> CapabilityManifest {
    let ty = component.component_type();
    let describe = |name: &str, item: &ComponentItem| {
        let (kind, functions) = match item {
            ComponentItem::ComponentInstance(instance) => (
                "interface",
                instance
                    .exports(engine)
                    .filter(|(_, e)| matches!(e.ty, ComponentItem::ComponentFunc(_)))
                    .map(|(n, _)| n.to_string())
                    .collect(),
            ),
            ComponentItem::ComponentFunc(_) => ("function", Vec::new()),
            ComponentItem::CoreFunc(_) => ("core-function", Vec::new()),
            ComponentItem::Module(_) => ("core-module", Vec::new()),
            ComponentItem::Component(_) => ("component", Vec::new()),
            ComponentItem::Type(_) => ("type", Vec::new()),
            ComponentItem::Resource(_) => ("resource", Vec::new()),
        };
        Capability {
            name: name.to_string(),
            kind: kind.to_string(),
            functions,
        }
    };
    CapabilityManifest {
        imports: ty
            .imports(engine)
            .map(|(name, e)| describe(name, &e.ty))
            .collect(),
        exports: ty
            .exports(engine)
            .map(|(name, e)| describe(name, &e.ty))
            .collect(),
    }
}
