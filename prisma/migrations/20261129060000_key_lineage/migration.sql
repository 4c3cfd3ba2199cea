-- A self-service key made with another key remembers its maker and the limits of every key above
-- it, so its requests count against those limits too (api-keys.service.ts, caller-rate-limits.ts).
ALTER TABLE "api_keys" ADD COLUMN "parent_id" UUID,
ADD COLUMN "limit_chain" JSONB;
