// node:fs/promises for pichamber: the promise API implemented in node-fs.js.

import { promises, constants, FileHandle } from "pichamber:node/fs";

export { constants, FileHandle };
export const readFile = promises.readFile;
export const writeFile = promises.writeFile;
export const appendFile = promises.appendFile;
export const stat = promises.stat;
export const lstat = promises.lstat;
export const readdir = promises.readdir;
export const mkdir = promises.mkdir;
export const mkdtemp = promises.mkdtemp;
export const rm = promises.rm;
export const rmdir = promises.rmdir;
export const unlink = promises.unlink;
export const rename = promises.rename;
export const copyFile = promises.copyFile;
export const cp = promises.cp;
export const realpath = promises.realpath;
export const access = promises.access;
export const truncate = promises.truncate;
export const readlink = promises.readlink;
export const symlink = promises.symlink;
export const link = promises.link;
export const chmod = promises.chmod;
export const lchmod = promises.lchmod;
export const chown = promises.chown;
export const lchown = promises.lchown;
export const utimes = promises.utimes;
export const lutimes = promises.lutimes;
export const open = promises.open;
export const opendir = promises.opendir;
export const watch = promises.watch;
export const statfs = promises.statfs;

export default promises;
