// What the plain-Node WebGPU microbenchmarks (scripts/int8-matrix-microbench.mjs, scripts/dp4a-microbench.mjs) share:
// buffers filled from typed arrays, a read-back, and the time of one dispatch from a pass of many. Not part of the
// product (the engine's own timing is src/gpu/timer.ts).

/**
 * Helpers bound to `device`; `timestamps`: whether the device was created with 'timestamp-query'. Any error the
 * device reports outside an error scope ends the process with status 1: a microbenchmark that runs on after a
 * failed call (a buffer write refused, a pipeline not created) prints times and checks of something else.
 */
export function gpuHelpers(device, timestamps) {
  const U = GPUBufferUsage;
  device.addEventListener('uncapturederror', (e) => {
    process.stderr.write(`WebGPU error: ${e.error.message}\n`);
    process.exit(1);
  });
  /** A buffer holding `data` (16-byte multiple, at least 16 bytes), also copyable both ways. */
  const buf = (data, usage = U.STORAGE) => {
    const size = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
    const b = device.createBuffer({ size, usage: usage | U.COPY_DST | U.COPY_SRC });
    device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
    return b;
  };
  /** The first `bytes` of buffer `b` as floats. */
  async function read(b, bytes) {
    const st = device.createBuffer({ size: bytes, usage: U.MAP_READ | U.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(b, 0, st, 0, bytes);
    device.queue.submit([enc.finish()]);
    await st.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(st.getMappedRange().slice(0));
    st.destroy();
    return out;
  }
  /** A kernel's output buffer, which checked runs first fill with NaN (fillNaN) and then read (readWritten). */
  const output = (bytes) => device.createBuffer({ size: bytes, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST });
  const fillNaN = (b) => device.queue.writeBuffer(b, 0, new Float32Array(b.size / 4).fill(Number.NaN));
  /** The first `bytes` of `b` as floats; throws where one is still NaN (an output the run did not write). */
  async function readWritten(b, bytes, what) {
    const out = await read(b, bytes);
    const missing = out.findIndex(Number.isNaN);
    if (missing >= 0) throw new Error(`${what}: output ${missing} was not written (NaN)`);
    return out;
  }
  const querySet = timestamps ? device.createQuerySet({ type: 'timestamp', count: 2 }) : null;
  const resolved = device.createBuffer({ size: 16, usage: U.QUERY_RESOLVE | U.COPY_SRC });
  /**
   * Seconds per dispatch of `workgroups` workgroups: `iters` dispatches in one pass, cycling through the bind groups
   * (copies of the weights, so that each dispatch reads them from memory), timed by the pass's timestamps where the
   * device has them, else by the wall clock of the submit.
   */
  async function time(pipeline, groups, iters, workgroups) {
    const enc = device.createCommandEncoder();
    const ts = querySet ? { querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } : undefined;
    const pass = enc.beginComputePass(ts ? { timestampWrites: ts } : {});
    pass.setPipeline(pipeline);
    for (let i = 0; i < iters; i++) {
      pass.setBindGroup(0, groups[i % groups.length]);
      pass.dispatchWorkgroups(workgroups);
    }
    pass.end();
    const st = device.createBuffer({ size: 16, usage: U.MAP_READ | U.COPY_DST });
    if (querySet) {
      enc.resolveQuerySet(querySet, 0, 2, resolved, 0);
      enc.copyBufferToBuffer(resolved, 0, st, 0, 16);
    }
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    const wall = (performance.now() - t0) / 1e3 / iters;
    if (!querySet) {
      st.destroy();
      return wall;
    }
    await st.mapAsync(GPUMapMode.READ);
    const stamps = new BigUint64Array(st.getMappedRange().slice(0));
    st.destroy();
    return Number(stamps[1] - stamps[0]) / 1e9 / iters;
  }
  return { buf, output, fillNaN, readWritten, time };
}
