// node:string_decoder for pichamber: StringDecoder turns a byte stream into text without
// splitting a character across chunks (UTF-8, UTF-16LE, base64/base64url), as Node's does.
import { Buffer } from "pichamber:node/buffer";

const ENCODINGS = {
  utf8: "utf8",
  "utf-8": "utf8",
  utf16le: "utf16le",
  "utf-16le": "utf16le",
  ucs2: "utf16le",
  "ucs-2": "utf16le",
  base64: "base64",
  base64url: "base64url",
  hex: "hex",
  latin1: "latin1",
  binary: "latin1",
  ascii: "ascii",
};

function normalize(encoding) {
  const name = ENCODINGS[String(encoding ?? "utf8").toLowerCase()];
  if (!name) {
    const err = new TypeError(`Unknown encoding: ${encoding}`);
    err.code = "ERR_UNKNOWN_ENCODING";
    throw err;
  }
  return name;
}

/** How many bytes at the end of `bytes` start a UTF-8 sequence that is not complete yet. */
function incompleteUtf8(bytes) {
  for (let back = 1; back <= Math.min(3, bytes.length); back++) {
    const b = bytes[bytes.length - back];
    if ((b & 0xc0) === 0x80) continue;
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

/** How many bytes at the end of `bytes` must wait for the next chunk. */
function keep(encoding, bytes) {
  switch (encoding) {
    case "utf8":
      return incompleteUtf8(bytes);
    case "utf16le": {
      const odd = bytes.length % 2;
      const end = bytes.length - odd;
      // A high surrogate waits for its pair.
      const high = end >= 2 && (bytes[end - 1] & 0xfc) === 0xd8;
      return odd + (high ? 2 : 0);
    }
    case "base64":
    case "base64url":
      return bytes.length % 3;
    default:
      return 0;
  }
}

export class StringDecoder {
  constructor(encoding) {
    this.encoding = normalize(encoding);
    this._pending = Buffer.alloc(0);
  }

  write(buf) {
    if (typeof buf === "string") return buf;
    let fresh = Buffer.from(buf);
    let completed = "";
    if (this.encoding === "utf16le" && this._pending.length === 1 && fresh.length) {
      // Node hands over a code unit completed from a cut one as it is, even half a surrogate pair.
      completed = Buffer.from([this._pending[0], fresh[0]]).toString("utf16le");
      this._pending = Buffer.alloc(0);
      fresh = fresh.subarray(1);
    }
    const bytes = this._pending.length ? Buffer.concat([this._pending, fresh]) : fresh;
    const held = keep(this.encoding, bytes);
    this._pending = Buffer.from(bytes.subarray(bytes.length - held));
    return completed + bytes.subarray(0, bytes.length - held).toString(this.encoding);
  }

  end(buf) {
    let text = buf === undefined ? "" : this.write(buf);
    if (this._pending.length) {
      const pending = this._pending;
      this._pending = Buffer.alloc(0);
      // An odd UTF-16 byte is dropped (it is no character); a cut UTF-8 sequence is U+FFFD.
      text += this.encoding === "utf16le" ? pending.subarray(0, pending.length - (pending.length % 2)).toString("utf16le") : pending.toString(this.encoding);
    }
    return text;
  }

  text(buf, offset) {
    return this.write(Buffer.from(buf).subarray(offset));
  }
}

export default { StringDecoder };
