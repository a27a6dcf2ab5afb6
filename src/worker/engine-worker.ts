/// <reference lib="webworker" />
/**
 * The dedicated module Worker that hosts the engine. The UI thread talks to it only through
 * comlink; GPU objects never cross this boundary.
 */
import * as Comlink from 'comlink';
import { Engine } from './engine.ts';

const engine = new Engine();
Comlink.expose(engine);
