-- Size caps per resource group (issue 17): a JSON object of byte caps
-- (params, result, error, checkpoint, effect_payload, effect_response, log);
-- a field not stored takes its default (host/src/model/caps.rs), so groups
-- made before this migration get the defaults.
ALTER TABLE resource_groups ADD COLUMN output_caps TEXT NOT NULL DEFAULT '{}';
