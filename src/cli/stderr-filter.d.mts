/** Types of stderr-filter.mjs (plain JavaScript: src/cli/launch.mjs loads it before any TypeScript loader). */
export declare function isDawnWarning(line: string): boolean;
export declare function createChatterFilter(write: (text: string) => void): {
  push(chunk: string): void;
  end(): void;
};
