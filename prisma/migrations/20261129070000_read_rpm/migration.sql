-- Two classes of rate limit: rpm counts requests that create work or charge, read_rpm every other
-- request (polls, lists, reads), so polling a result never spends the budget meant to cap work.
ALTER TABLE "api_keys" ADD COLUMN "read_rpm" INTEGER;
ALTER TABLE "namespaces" ADD COLUMN "read_rpm" INTEGER;
