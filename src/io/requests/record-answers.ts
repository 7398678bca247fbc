/**
 * `recordAnswers`: writes what a committed run answered into the answer records of the members it
 * names, without their leases (docs/leases.md "Shared answers"): for a result whose release could
 * not carry its answers, and for a result replayed from its commit manifest. Touches no lease
 * record, so the mirror is not involved.
 */
import type { FenceResult } from '../../lease/lease-results.js';
import type { AnswerWriter, GroupAnswers } from '../../lease/table-contract.js';
import { type RequestKind, targetKeys, unwrap } from './request-kind.js';

type RecordAnswersRequest = { readonly kind: 'recordAnswers'; readonly answers: GroupAnswers; readonly writer: AnswerWriter; readonly nowMs: number };

export const recordAnswers: RequestKind<RecordAnswersRequest, FenceResult> = {
  kind: 'recordAnswers',
  readOnly: false,
  keys: (request) => [...targetKeys(request.answers?.settled), ...targetKeys(request.answers?.open)],
  plan(request, ctx) {
    const op = ctx.targetStore().planRecordAnswers(request.answers, request.writer, request.nowMs);
    return { target: [op], work: [], finish: (r) => unwrap<FenceResult>(r.target[0]) };
  },
};
