//! Which tenants a resource group admits (`group_tenants`, see
//! [`crate::model::admission`]): the admin's writes, audited in the
//! transaction that makes them, and the reads that job apply, the runner
//! and a team's view of groups check against.

use super::dialect::now_ms;
use super::*;

impl Store {
    /// [`ReadStore::group_tenants`].
    pub(super) async fn tenants_of_group(&self, group: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            self.sql("SELECT tenant FROM group_tenants WHERE resource_group = ? ORDER BY tenant"),
        )
        .bind(group)
        .fetch_all(&self.pool)
        .await?)
    }

    /// [`ControlStore::group_tenant_set`].
    pub(super) async fn set_group_tenant(
        &self,
        group: &str,
        tenant: &str,
        allow: bool,
        actor: &str,
    ) -> StoreResult<bool> {
        crate::model::admission::check_entry(tenant).map_err(StoreError::Conflict)?;
        let (mut tx, _turn) = self.begin_write().await?;
        self.group_must_exist(&mut tx, group).await?;
        let changed = if allow {
            sqlx::query(self.sql(concat!(
                "INSERT INTO group_tenants (resource_group, tenant, allowed_by, allowed_at) \
                 VALUES (?, ?, ?, ",
                now_ms!(),
                ") ON CONFLICT (resource_group, tenant) DO NOTHING"
            )))
            .bind(group)
            .bind(tenant)
            .bind(actor)
            .execute(&mut *tx)
            .await?
        } else {
            sqlx::query(
                self.sql("DELETE FROM group_tenants WHERE resource_group = ? AND tenant = ?"),
            )
            .bind(group)
            .bind(tenant)
            .execute(&mut *tx)
            .await?
        }
        .rows_affected()
            == 1;
        if changed {
            let action = if allow {
                "group.allow"
            } else {
                "group.disallow"
            };
            let detail = serde_json::json!({ "tenant": tenant });
            self.audit_append(&mut tx, actor, action, group, detail)
                .await?;
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// [`ControlStore::group_tenants_replace`].
    pub(super) async fn replace_group_tenants(
        &self,
        group: &str,
        tenants: &[String],
        actor: &str,
    ) -> StoreResult<()> {
        for tenant in tenants {
            crate::model::admission::check_entry(tenant).map_err(StoreError::Conflict)?;
        }
        let (mut tx, _turn) = self.begin_write().await?;
        self.group_must_exist(&mut tx, group).await?;
        self.replace_group_tenants_in(&mut tx, group, tenants, actor)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replace a group's tenant list inside a caller's transaction (a
    /// groups file applies whole or not at all), audited when it changed.
    pub(super) async fn replace_group_tenants_in(
        &self,
        tx: &mut Tx,
        group: &str,
        tenants: &[String],
        actor: &str,
    ) -> StoreResult<()> {
        let before: Vec<String> = sqlx::query_scalar(
            self.sql("SELECT tenant FROM group_tenants WHERE resource_group = ? ORDER BY tenant"),
        )
        .bind(group)
        .fetch_all(&mut **tx)
        .await?;
        let mut after = tenants.to_vec();
        after.sort();
        after.dedup();
        if before == after {
            return Ok(());
        }
        sqlx::query(self.sql("DELETE FROM group_tenants WHERE resource_group = ?"))
            .bind(group)
            .execute(&mut **tx)
            .await?;
        for tenant in &after {
            sqlx::query(self.sql(concat!(
                "INSERT INTO group_tenants (resource_group, tenant, allowed_by, allowed_at) \
                 VALUES (?, ?, ?, ",
                now_ms!(),
                ")"
            )))
            .bind(group)
            .bind(tenant)
            .bind(actor)
            .execute(&mut **tx)
            .await?;
        }
        let detail = serde_json::json!({ "before": before, "after": after });
        self.audit_append(tx, actor, "group.tenants", group, detail)
            .await
    }

    async fn group_must_exist(&self, tx: &mut Tx, group: &str) -> StoreResult<()> {
        let found: Option<i64> =
            sqlx::query_scalar(self.sql("SELECT 1 FROM resource_groups WHERE name = ?"))
                .bind(group)
                .fetch_optional(&mut **tx)
                .await?;
        match found {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(format!(
                "resource group '{group}' (create it with `paddock group set {group} ...`)"
            ))),
        }
    }
}
