// The I/O thread's entry point: parse the startup data, wire the parent port, run the service.
import { parentPort, workerData } from 'node:worker_threads';
import { runIoWorker, type IoWorkerData } from '../src/io/io-worker-main.js';

if (!parentPort) throw new Error('io-worker must run as a worker thread');
await runIoWorker(workerData as IoWorkerData, parentPort);
