//! A resource group as an attempt starts under it: its limits and the
//! tenants it admits, read at most once a second per group, so an admin's
//! change applies to attempts that start after it, within a second.

use super::Runner;
use crate::model::{Claim, ErrorClass, ResourceGroup, RunReport, RunResult, admission};
use std::time::{Duration, Instant};

/// A group as last read, with the tenants it admits.
pub(super) struct Cached {
    read: Instant,
    group: ResourceGroup,
    tenants: Vec<String>,
}

/// How long a read group serves attempts before it is read again.
const FRESH: Duration = Duration::from_secs(1);

impl Runner {
    /// The claim's group, if it still admits the claim's tenant; otherwise
    /// the refusal to end the attempt with. A binding an admin took back
    /// after the job was applied stops the job's next attempt here, before
    /// any guest code runs or any effect is sent. The outer error: the group
    /// could not be read (or is gone).
    pub(super) async fn admitted_group(
        &self,
        claim: &Claim,
    ) -> Result<Result<ResourceGroup, String>, String> {
        let name = &claim.resource_group;
        let cached = {
            let groups = self.groups.lock().expect("group cache");
            groups
                .get(name)
                .filter(|c| c.read.elapsed() < FRESH)
                .map(|c| (c.group.clone(), c.tenants.clone()))
        };
        // A refusal is never taken from the cache: a tenant an admin has
        // just admitted runs at once; only a binding taken back may still
        // admit for up to [`FRESH`].
        let (group, tenants) = match cached {
            Some((group, tenants)) if admission::admits(&tenants, &claim.tenant) => {
                (group, tenants)
            }
            _ => self.read_group(name).await?,
        };
        if admission::admits(&tenants, &claim.tenant) {
            Ok(Ok(group))
        } else {
            Ok(Err(admission::refusal(name, &claim.tenant)))
        }
    }

    /// Read a group and the tenants it admits, and cache them.
    async fn read_group(&self, name: &str) -> Result<(ResourceGroup, Vec<String>), String> {
        let group = self
            .store
            .group_get(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("resource group '{name}' is gone"))?;
        let tenants = self
            .store
            .group_tenants(name)
            .await
            .map_err(|e| e.to_string())?;
        let cached = Cached {
            read: Instant::now(),
            group: group.clone(),
            tenants: tenants.clone(),
        };
        self.groups
            .lock()
            .expect("group cache")
            .insert(name.to_string(), cached);
        Ok((group, tenants))
    }
}

/// The report of an attempt its group refused: a permanent failure with
/// the reason, nothing run.
pub(super) fn refused(why: String) -> RunReport {
    RunReport {
        result: RunResult::JobFailed {
            class: ErrorClass::Permanent,
            message: format!("not run: {why}"),
        },
        fuel_used: 0,
        peak_memory_bytes: 0,
        wall: Duration::ZERO,
        log: String::new(),
    }
}
