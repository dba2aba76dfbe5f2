// Preloaded (node --require ./loopback.cjs ...) into a server started by the
// tests, so that it listens on 127.0.0.1 only, whatever address it asks for:
// @modelcontextprotocol/server-everything calls app.listen(PORT), which would
// listen on every interface. With LOOPBACK_ADDR_FILE set, the address it got
// (PORT=0 lets the kernel pick the port) is written there once it listens.
"use strict";
const fs = require("node:fs");
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    // listen(options[, callback]); a pipe path is left alone.
    if (first.path === undefined) args[0] = { ...first, host: "127.0.0.1" };
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, callback])
    const rest = args.slice(1);
    if (typeof rest[0] === "string") rest.shift();
    args = [Number(first), "127.0.0.1", ...rest];
  } else if (first === undefined || typeof first === "function") {
    // listen([callback]): a random port on every interface.
    args = [0, "127.0.0.1", ...args];
  }
  const file = process.env.LOOPBACK_ADDR_FILE;
  if (file) {
    this.once("listening", () => {
      const { address, port } = this.address();
      fs.writeFileSync(file + ".tmp", `${address}:${port}`);
      fs.renameSync(file + ".tmp", file);
    });
  }
  return listen.apply(this, args);
};
