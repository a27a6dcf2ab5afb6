/**
 * Pipelines created in this realm (every KernelCache: target, assistant, drafter) and the wall time their creation
 * took. Dawn in Node compiles a pipeline when it is created, so there the time is the compile's; a browser may
 * compile in its GPU process and make the first dispatch wait instead, so there the time is a lower bound and the
 * count is what to read. Generation reports the decode's share (src/model/generate.ts): on a machine whose driver
 * has not cached them (on an H200 the first 12B classic run 31.6 tokens/s, the next ones 86-94; docs/PERFORMANCE.md,
 * end to end), a first run pays their compiles inside its decode time.
 */
export const pipelineCreation = { created: 0, ms: 0 };
