// node:diagnostics_channel for pichamber: named channels that publishers post to and
// subscribers listen on, within the extension's instance.

const channels = new Map();

export class Channel {
  #subscribers = [];
  constructor(name) {
    this.name = name;
  }
  get hasSubscribers() {
    return this.#subscribers.length > 0;
  }
  subscribe(onMessage) {
    this.#subscribers.push(onMessage);
  }
  unsubscribe(onMessage) {
    const at = this.#subscribers.indexOf(onMessage);
    if (at < 0) return false;
    this.#subscribers.splice(at, 1);
    return true;
  }
  publish(message) {
    for (const subscriber of [...this.#subscribers]) {
      try {
        subscriber(message, this.name);
      } catch (err) {
        // Node reports a subscriber's error on the next tick and does not stop the others.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
  bindStore() {}
  unbindStore() {
    return false;
  }
  runStores(_data, fn, thisArg, ...args) {
    return fn.apply(thisArg, args);
  }
}

export function channel(name) {
  let found = channels.get(name);
  if (!found) {
    found = new Channel(name);
    channels.set(name, found);
  }
  return found;
}

export function hasSubscribers(name) {
  return channels.get(name)?.hasSubscribers ?? false;
}

export function subscribe(name, onMessage) {
  channel(name).subscribe(onMessage);
}

export function unsubscribe(name, onMessage) {
  return channel(name).unsubscribe(onMessage);
}

/** start / end / asyncStart / asyncEnd / error channels of one name. */
export function tracingChannel(nameOrChannels) {
  const named = (event) =>
    typeof nameOrChannels === "string" ? channel(`tracing:${nameOrChannels}:${event}`) : nameOrChannels[event];
  const events = ["start", "end", "asyncStart", "asyncEnd", "error"];
  const tracing = Object.fromEntries(events.map((e) => [e, named(e)]));
  return {
    ...tracing,
    get hasSubscribers() {
      return events.some((e) => tracing[e].hasSubscribers);
    },
    subscribe(handlers) {
      for (const e of events) if (handlers[e]) tracing[e].subscribe(handlers[e]);
    },
    unsubscribe(handlers) {
      let all = true;
      for (const e of events) if (handlers[e]) all = tracing[e].unsubscribe(handlers[e]) && all;
      return all;
    },
    traceSync(fn, context = {}, thisArg, ...args) {
      tracing.start.publish(context);
      try {
        const result = fn.apply(thisArg, args);
        context.result = result;
        return result;
      } catch (error) {
        context.error = error;
        tracing.error.publish(context);
        throw error;
      } finally {
        tracing.end.publish(context);
      }
    },
    async tracePromise(fn, context = {}, thisArg, ...args) {
      tracing.start.publish(context);
      try {
        const result = await fn.apply(thisArg, args);
        context.result = result;
        tracing.asyncEnd.publish(context);
        return result;
      } catch (error) {
        context.error = error;
        tracing.error.publish(context);
        throw error;
      } finally {
        tracing.end.publish(context);
      }
    },
  };
}

export default { channel, hasSubscribers, subscribe, unsubscribe, tracingChannel, Channel };
