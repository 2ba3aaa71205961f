-- 0022: indexes for the Portal's operator views (issue 23), so that the tenants page costs the same
-- with 10,000 apps as with one: its figures are counted per app of the page only.
--
-- Live sessions of an app (sessions had indexes by user and by expiry only: counting an app's
-- sessions read the whole table).
CREATE INDEX sessions_app_expiry ON sessions (app_ref, expires_at);
-- The latest sign-in of an app: one entry read from the end of the app's range.
CREATE INDEX users_app_last_login ON users (app_ref, last_login) WHERE last_login IS NOT NULL;
