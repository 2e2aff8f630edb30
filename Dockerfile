# The control-plane image (first draft: the reconciler issue finishes it with the Docker socket and
# the test workspace image). Node 24 runs the TypeScript sources directly; there is no build step.
FROM node:24-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY src ./src
COPY api ./api
COPY controllers ./controllers
COPY migrations ./migrations
COPY bin ./bin
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s CMD node -e "fetch('http://127.0.0.1:8080/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/main.ts"]
