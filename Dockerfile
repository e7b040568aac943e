# syntax=docker/dockerfile:1
# Stage 1: build. `npm ci` installs everything and runs `prepare`, which bundles src/ into
# dist/cli/ (scripts/build.mjs, esbuild) and builds the dashboard from web/ into
# dist/dashboard/ (Vite); then the dev dependencies (typescript, tsx, esbuild, vite, preact,
# smtp-server, ...) are pruned.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY scripts/build.mjs ./scripts/build.mjs
COPY src ./src
COPY web ./web
RUN npm ci --no-audit --no-fund \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# Stage 2: the runtime image, as the unprivileged `node` user, running dist/ (no TypeScript).
FROM node:20-bookworm-slim
# tini is PID 1: it forwards SIGTERM to node and reaps orphans, so node is not PID 1 (which
# gets no default signal handling) and no exited PostgreSQL child is left a zombie.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    MAILGATE_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY config ./config
RUN mkdir -p /data && chown node:node /data
USER node
# Embedded PostgreSQL data and the generated secret key live here unless DATABASE_URL and
# MAILGATE_SECRET_KEY are given.
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# SIGTERM (docker stop) drains in-flight work; give it the shutdown timeout: docker stop -t 45
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/cli/main.js", "serve"]
