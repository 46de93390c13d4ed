// node:tty for pichamber: an extension's standard streams go to the host's log, never to a
// terminal, so no descriptor is a TTY: isatty is false for every one (as Node says of a pipe or
// a file), and opening a TTY stream fails as Node's does on a descriptor that is not one.

export function isatty(fd) {
  return false;
}

function notATerminal(fd) {
  const err = new Error(
    `TTY initialization failed: uv_tty_init returned EINVAL (invalid argument)`,
  );
  err.name = "SystemError";
  err.code = "ERR_TTY_INIT_FAILED";
  err.errno = -22;
  err.syscall = "uv_tty_init";
  err.info = { errno: -22, code: "EINVAL", message: "invalid argument", syscall: "uv_tty_init" };
  return err;
}

export class ReadStream {
  constructor(fd) {
    throw notATerminal(fd);
  }
}

export class WriteStream {
  constructor(fd) {
    throw notATerminal(fd);
  }
}

export default { isatty, ReadStream, WriteStream };
