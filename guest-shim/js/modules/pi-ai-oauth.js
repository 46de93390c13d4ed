// pi-ai's `oauth` entry, which exports nothing (its types only) in pi 1.6.0.
export {};
