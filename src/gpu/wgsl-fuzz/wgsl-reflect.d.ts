// wgsl_reflect's package.json points Node at a CommonJS build under "type": "module", which Node cannot load;
// its ES module build is imported by path instead (Vite and Node alike), and has the package's own types.
declare module 'wgsl_reflect/wgsl_reflect.module.js' {
  export * from 'wgsl_reflect';
}
