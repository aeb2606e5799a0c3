//! `componentize`: encode wit-bindgen core modules as components, and show a
//! component's WIT-level imports and exports.
//!
//! ```text
//! componentize CORE.wasm OUT.wasm     encode (validating) CORE into OUT
//! componentize --wat MOD.wat WIT_DIR WORLD OUT.wasm
//!                                     a hand-written core module (guests/wat/):
//!                                     embed WORLD's type, then encode as above
//! componentize --print FILE.wasm...   print each component's imports/exports
//! ```

use anyhow::{bail, Context, Result};
use std::path::Path;
use wit_component::{ComponentEncoder, DecodedWasm};
use wit_parser::{Resolve, WorldItem, WorldKey};

/// A core module written in WAT, with `world`'s component type embedded as
/// wit-bindgen would, encoded as a component into `out`.
fn encode_wat(wat: &Path, wit: &Path, world: &str, out: &Path) -> Result<()> {
    let mut module = ::wat::parse_file(wat).with_context(|| format!("parsing {}", wat.display()))?;
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_dir(wit)
        .with_context(|| format!("reading {}", wit.display()))?;
    let world = resolve.select_world(&[pkg], Some(world))?;
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )?;
    let core = out.with_extension("core.wasm");
    std::fs::write(&core, &module).with_context(|| format!("writing {}", core.display()))?;
    let encoded = encode(&core, out);
    let _ = std::fs::remove_file(&core);
    encoded
}

fn encode(core: &Path, out: &Path) -> Result<()> {
    let bytes = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let component = ComponentEncoder::default()
        .module(&bytes)
        .with_context(|| {
            format!(
                "{}: no usable component type (built with wit-bindgen?)",
                core.display()
            )
        })?
        .validate(true)
        .encode()
        .with_context(|| format!("encoding {}", core.display()))?;
    // Write then rename so an interrupted run never leaves a half-written
    // component that looks newer than its core module.
    let tmp = out.with_extension("wasm.tmp");
    std::fs::write(&tmp, &component).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("renaming to {}", out.display()))?;
    Ok(())
}

fn describe(resolve: &Resolve, key: &WorldKey, item: &WorldItem) -> String {
    let name = resolve.name_world_key(key);
    match item {
        WorldItem::Interface { .. } => format!("interface {name}"),
        WorldItem::Function(f) => {
            let params: Vec<String> = f
                .params
                .iter()
                .map(|(n, t)| format!("{n}: {}", type_name(resolve, t)))
                .collect();
            let result = match &f.result {
                Some(t) => format!(" -> {}", type_name(resolve, t)),
                None => String::new(),
            };
            format!("func {name}({}){result}", params.join(", "))
        }
        WorldItem::Type(_) => format!("type {name}"),
    }
}

fn type_name(resolve: &Resolve, ty: &wit_parser::Type) -> String {
    use wit_parser::{Type, TypeDefKind};
    match ty {
        Type::Id(id) => {
            let def = &resolve.types[*id];
            if let Some(n) = &def.name {
                return n.clone();
            }
            match &def.kind {
                TypeDefKind::List(t) => format!("list<{}>", type_name(resolve, t)),
                TypeDefKind::Option(t) => format!("option<{}>", type_name(resolve, t)),
                TypeDefKind::Result(r) => {
                    let ok =
                        r.ok.as_ref()
                            .map(|t| type_name(resolve, t))
                            .unwrap_or_else(|| "_".into());
                    let err = r
                        .err
                        .as_ref()
                        .map(|t| type_name(resolve, t))
                        .unwrap_or_else(|| "_".into());
                    format!("result<{ok}, {err}>")
                }
                TypeDefKind::Type(t) => type_name(resolve, t),
                other => format!("<{}>", other.as_str()),
            }
        }
        other => format!("{other:?}").to_lowercase(),
    }
}

fn print(file: &Path) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let decoded =
        wit_component::decode(&bytes).with_context(|| format!("decoding {}", file.display()))?;
    let (resolve, world) = match decoded {
        DecodedWasm::Component(r, w) => (r, w),
        DecodedWasm::WitPackage(..) => {
            bail!("{} is a WIT package, not a component", file.display())
        }
    };
    let w = &resolve.worlds[world];
    println!("{} ({} bytes)", file.display(), bytes.len());
    for (k, item) in &w.imports {
        // Types pulled in by `use` are not separate component imports.
        if matches!(item, WorldItem::Type(_)) {
            continue;
        }
        println!("  import {}", describe(&resolve, k, item));
    }
    for (k, item) in &w.exports {
        println!("  export {}", describe(&resolve, k, item));
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, files @ ..] if flag == "--print" && !files.is_empty() => {
            for f in files {
                print(Path::new(f))?;
            }
            Ok(())
        }
        [flag, wat, wit, world, out] if flag == "--wat" => {
            encode_wat(Path::new(wat), Path::new(wit), world, Path::new(out))
        }
        [core, out] if !core.starts_with("--") => encode(Path::new(core), Path::new(out)),
        _ => bail!("usage: componentize CORE.wasm OUT.wasm | componentize --print FILE.wasm..."),
    }
}
