-- 0031: the Portal's apps search (issue 23) with 10,000 apps. The apps list and the tenants view search
-- by a name prefix (apps_lower_name) OR an appId prefix; app_id's unique index cannot serve a LIKE prefix,
-- so a search matching no app read every row (5 ms at 10,000 apps, growing with the table). With this
-- index both halves are index ranges (BitmapOr): 0.1 ms (tools/bench/portal.sh).
CREATE INDEX apps_app_id_pattern ON apps (app_id text_pattern_ops);
