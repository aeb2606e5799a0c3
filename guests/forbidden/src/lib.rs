//! `forbidden`: a component that imports an interface the host does not grant.
//!
//! Its world (`guests/forbidden/wit/net.wit`) includes `paddock:job/job` and
//! adds `import acme:net/sockets@0.1.0`. `run` really calls `connect`, so the
//! import survives into the component. The host must refuse this component at
//! upload (its imports are not a subset of what the host provides), and would
//! fail to instantiate it anyway.

wit_bindgen::generate!({
    // The shared job package first: the local package depends on it.
    path: ["../../wit", "wit"],
    world: "acme:net/forbidden",
    // Interfaces from a package other than the world's own (`paddock:job`)
    // need `with` or `generate_all` in wit-bindgen 0.46.
    generate_all,
});

use acme::net::sockets;
use paddock::job::types::ErrorClass;

struct Forbidden;

impl Guest for Forbidden {
    fn run() -> Result<Vec<u8>, JobError> {
        match sockets::connect("example.com", 80) {
            Ok(handle) => Ok(format!("connected: {handle}").into_bytes()),
            Err(e) => Err(JobError {
                class: ErrorClass::Permanent,
                message: format!("connect failed: {e}"),
            }),
        }
    }
}

export!(Forbidden);
