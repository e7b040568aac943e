# syntax=docker/dockerfile:1
# Stage 1: production dependencies only (tsx runs the TypeScript sources; no build step).
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# Stage 2: the runtime image, as the unprivileged `node` user.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    MAILGATE_DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY src ./src
COPY config ./config
RUN mkdir -p /data && chown node:node /data
USER node
# Embedded PostgreSQL data and the generated secret key live here unless DATABASE_URL and
# MAILGATE_SECRET_KEY are given.
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# SIGTERM (docker stop) drains in-flight work; give it the shutdown timeout: docker stop -t 40
STOPSIGNAL SIGTERM
CMD ["node", "bin/mailgate.js", "serve"]
