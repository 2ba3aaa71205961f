-- 0033: the CosyncJWT import checks every batch of users for provider accounts (login_provider,
-- social_user_id) that another user of the app already holds. Without an index that check read the
-- whole users table for each batch of 2,000 rows, so the import slowed down as the table grew (issue 24,
-- tools/bench/import.sh). Only imported rows carry social_user_id (0010), so the index holds those alone.
CREATE INDEX users_app_social ON users (app_ref, login_provider, social_user_id) WHERE social_user_id IS NOT NULL;
